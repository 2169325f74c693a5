# expect: wrong_answer
# mistake: computes the frequencies as base ** (-i / D) with i = arange(0, D, 2) divided by D // 2, not by D:
# the exponent runs to -2 instead of -1, so the slow pairs rotate far too slowly
import torch


def apply_rope(q, k, base=10000.0):
    B, S, D = q.shape
    i = torch.arange(0, D, 2, dtype=q.dtype, device=q.device)
    inv = base ** (-i / (D // 2))
    ang = torch.arange(S, dtype=q.dtype, device=q.device)[:, None] * inv
    cos, sin = ang.cos(), ang.sin()

    def rot(x):
        x1, x2 = x[..., 0::2], x[..., 1::2]
        return torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).flatten(-2)

    return rot(q), rot(k)

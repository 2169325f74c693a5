# expect: wrong_answer
# mistake: takes the positions from the first axis (written for (S, D) inputs: positions = arange(q.shape[0])),
# so on (B, S, D) every token of batch element b is rotated by b
import torch


def apply_rope(q, k, base=10000.0):
    D = q.shape[-1]
    inv = base ** (-torch.arange(0, D, 2, dtype=q.dtype, device=q.device) / D)
    ang = torch.arange(q.shape[0], dtype=q.dtype, device=q.device)[:, None, None] * inv  # (B, 1, D/2)
    cos, sin = ang.cos(), ang.sin()

    def rot(x):
        x1, x2 = x[..., 0::2], x[..., 1::2]
        return torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).flatten(-2)

    return rot(q), rot(k)

# expect: wrong_answer
# mistake: rotate-half pairing (i, i + D/2) instead of interleaved pairs
import torch


def apply_rope(q, k, base=10000.0):
    B, S, D = q.shape
    theta = base ** (-torch.arange(0, D, 2, dtype=q.dtype, device=q.device) / D)
    angle = torch.arange(S, dtype=q.dtype, device=q.device)[:, None] * theta
    cos, sin = torch.cat([angle.cos()] * 2, -1), torch.cat([angle.sin()] * 2, -1)

    def rot(x):
        half = torch.cat([-x[..., D // 2:], x[..., : D // 2]], dim=-1)
        return x * cos + half * sin

    return rot(q), rot(k)

# expect: accepted
# alternative: angles and cos/sin computed in float64, cast to the input dtype; even and odd lanes written with index_copy
import torch


def apply_rope(q, k, base=10000.0):
    S, D = q.shape[-2], q.shape[-1]
    pos = torch.arange(S, dtype=torch.float64, device=q.device)
    inv = 1.0 / (base ** (torch.arange(0, D, 2, dtype=torch.float64, device=q.device) / D))
    ang = pos[:, None] * inv[None]
    cos, sin = ang.cos().to(q.dtype), ang.sin().to(q.dtype)
    even = torch.arange(0, D, 2, device=q.device)

    def rot(x):
        x1, x2 = x[..., 0::2], x[..., 1::2]
        out = torch.zeros_like(x)
        out = out.index_copy(-1, even, x1 * cos - x2 * sin)
        return out.index_copy(-1, even + 1, x1 * sin + x2 * cos)

    return rot(q), rot(k)

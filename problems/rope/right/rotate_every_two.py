# expect: accepted
# alternative: full-width cos/sin tables and a rotate-every-two helper
import math

import torch


def rotate_every_two(x):
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack([-x2, x1], dim=-1).flatten(-2)


def apply_rope(q, k, base=10000.0):
    S, D = q.shape[1], q.shape[2]
    inv_freq = torch.exp(torch.arange(0, D, 2, dtype=q.dtype, device=q.device) * (-math.log(base) / D))
    angle = torch.arange(S, dtype=q.dtype, device=q.device)[:, None] * inv_freq  # (S, D/2)
    cos = angle.cos().repeat_interleave(2, dim=-1)  # (S, D)
    sin = angle.sin().repeat_interleave(2, dim=-1)
    return q * cos + rotate_every_two(q) * sin, k * cos + rotate_every_two(k) * sin

# expect: accepted
# alternative: cos/sin tables memoised at module level, keyed by everything they depend on
from functools import lru_cache

import torch


@lru_cache(maxsize=64)
def tables(S, D, base, dtype, device):
    inv_freq = 1.0 / base ** (torch.arange(0, D, 2, dtype=torch.float64) / D)
    angle = torch.outer(torch.arange(S, dtype=torch.float64), inv_freq)
    return angle.cos().to(dtype=dtype, device=device), angle.sin().to(dtype=dtype, device=device)


def apply_rope(q, k, base=10000.0):
    B, S, D = q.shape
    cos, sin = tables(S, D, float(base), q.dtype, q.device)

    def rot(x):
        pairs = x.unflatten(-1, (D // 2, 2))  # (B, S, D/2, 2)
        a, b = pairs[..., 0], pairs[..., 1]
        return torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).flatten(-2)

    return rot(q), rot(k)

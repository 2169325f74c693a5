# expect: wrong_answer
# mistake: caches cos/sin per (S, D) at module level; a later call with the same shapes and another base reuses the old angles
import torch

_TABLES = {}


def apply_rope(q, k, base=10000.0):
    B, S, D = q.shape
    if (S, D) not in _TABLES:
        theta = base ** (-torch.arange(0, D, 2, dtype=q.dtype, device=q.device) / D)
        angle = torch.arange(S, dtype=q.dtype, device=q.device)[:, None] * theta
        _TABLES[(S, D)] = (angle.cos(), angle.sin())
    cos, sin = _TABLES[(S, D)]

    def rot(x):
        x1, x2 = x[..., 0::2], x[..., 1::2]
        return torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1).flatten(-2)

    return rot(q), rot(k)

# expect: wrong_answer
# mistake: cos/sin cached per (D, base, device) for max(S, 64) positions at the first call, then indexed with positions modulo the table length: any later S > 64 (or a first call with S <= 64 followed by a longer one) reuses the angles of position m - 64
import torch

_cache = {}


def apply_rope(q, k, base=10000.0):
    B, S, D = q.shape
    key = (D, float(base), q.device)
    if key not in _cache:
        inv = 1.0 / (base ** (torch.arange(0, D, 2, dtype=torch.float64) / D))
        ang = torch.outer(torch.arange(max(S, 64), dtype=torch.float64), inv)
        _cache[key] = (ang.cos().to(q.device), ang.sin().to(q.device))
    cos, sin = _cache[key]
    L = cos.shape[0]
    idx = torch.arange(S, device=q.device) % L
    cos, sin = cos[idx].to(q.dtype), sin[idx].to(q.dtype)

    def rot(x):
        x1, x2 = x[..., 0::2], x[..., 1::2]
        return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)

    return rot(q), rot(k)

# expect: runtime_error
# mistake: HF-style rotary cache of max_position_embeddings = 2048 rows built per (D, base) and sliced [:S] without the "extend when seq_len > cached" branch: any S > 2048 breaks (the table is shorter than the sequence)
import torch

_CACHE = {}
MAX_POS = 2048


def _tables(D, base, device):
    key = (D, float(base), str(device))
    if key not in _CACHE:
        inv = 1.0 / (base ** (torch.arange(0, D, 2, dtype=torch.float64, device=device) / D))
        ang = torch.outer(torch.arange(MAX_POS, dtype=torch.float64, device=device), inv)
        _CACHE[key] = (ang.cos().float(), ang.sin().float())
    return _CACHE[key]


def apply_rope(q, k, base=10000.0):
    B, S, D = q.shape
    cos, sin = _tables(D, base, q.device)
    cos, sin = cos[:S].to(q.dtype), sin[:S].to(q.dtype)

    def rot(x):
        x1, x2 = x[..., 0::2], x[..., 1::2]
        return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), -1).flatten(-2)

    return rot(q), rot(k)

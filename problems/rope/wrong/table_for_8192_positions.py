# expect: runtime_error
# mistake: cos/sin tables built once for 8192 positions (Llama-3's max_position_embeddings), as HF caches them, and
#   sliced to the length: a sequence past 8192 tokens gets 8192 rows of angles
import torch

MAX_POSITIONS = 8192
_TABLES = {}


def _tables(D, base, device):
    key = (D, float(base), str(device))
    if key not in _TABLES:
        inv = base ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
        ang = torch.outer(torch.arange(MAX_POSITIONS, dtype=torch.float64), inv)
        _TABLES[key] = (ang.cos().float().to(device), ang.sin().float().to(device))
    return _TABLES[key]


def apply_rope(q, k, base=10000.0):
    S, D = q.shape[-2], q.shape[-1]
    cos, sin = _tables(D, base, q.device)
    cos, sin = cos[:S].to(q.dtype), sin[:S].to(q.dtype)

    def rot(x):
        x1, x2 = x[..., 0::2], x[..., 1::2]
        return torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).flatten(-2)

    return rot(q), rot(k)

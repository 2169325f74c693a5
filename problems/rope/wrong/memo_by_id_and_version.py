# expect: wrong_answer
# problem: rope
# mistake: memoises the last (q, k) result under (id, ._version, shape) of q and k and the base: a refill bumps a
#   version, but new q, k tensors that CPython puts at freed ones' addresses start at version 0 again and get the
#   old result. rope has no case whose inputs are freed between calls.
import torch

_memo = []


def _key(t):
    return (id(t), t._version, tuple(t.shape), t.dtype)


def apply_rope(q, k, base=10000.0):
    key = (_key(q), _key(k), float(base), torch.is_grad_enabled())
    if _memo and _memo[0][0] == key:
        return _memo[0][1]
    B, S, D = q.shape
    inv = base ** (-torch.arange(0, D, 2, dtype=torch.float64, device=q.device) / D)
    ang = torch.arange(S, dtype=torch.float64, device=q.device)[:, None] * inv[None, :]
    cos, sin = ang.cos().to(q.dtype), ang.sin().to(q.dtype)

    def rot(x):
        a, b = x[..., 0::2], x[..., 1::2]
        return torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).flatten(-2)

    res = (rot(q), rot(k))
    _memo[:] = [(key, res)]
    return res

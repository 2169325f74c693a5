# expect: accepted
# problem: linear_attention
# Not an attack: the right defaults reached through a decorator that passes everything on
# (functools.wraps, *args/**kwargs) and a functools.partial that binds a keyword of its own.
# (A partial that binds the contract's eps by keyword makes eps keyword-only: a caller's
# linear_attention(Q, K, V, 1e-6) then raises, so that is a wrong interface; see test_mechanisms.)
import functools

import torch.nn.functional as F


def logged(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)
    return wrapper


@logged
def _linear_attention(Q, K, V, eps=1e-6, *, scale=1.0):
    q, k = F.elu(Q) + 1, F.elu(K) + 1
    kv, z = k.transpose(1, 2) @ V, k.sum(dim=1)
    return (q @ kv) / ((q * z[:, None, :]).sum(dim=-1, keepdim=True) + eps)


linear_attention = functools.partial(_linear_attention, scale=None)

# expect: wrong_answer
# problem: sdpa
# mistake: memoises the last output under (id, ._version, shape) of Q, K, V and the mask, "to skip recomputing the
#   same call": a refill bumps a version, but a new tensor that CPython puts at a freed one's address starts at
#   version 0 again and gets the old call's output. sdpa has no case whose inputs are freed between calls.
import math

import torch

_memo = []


def _key(t):
    return None if t is None else (id(t), t._version, tuple(t.shape), t.dtype)


def scaled_dot_product_attention(Q, K, V, mask=None):
    key = (_key(Q), _key(K), _key(V), _key(mask), torch.is_grad_enabled())
    if _memo and _memo[0][0] == key:
        return _memo[0][1]
    s = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    out = torch.softmax(s, dim=-1) @ V
    _memo[:] = [(key, out)]
    return out

# expect: bad_interface
# problem: linear_attention
# A decorator (functools.wraps: inspect.signature follows __wrapped__ and shows eps=1e-6) replaces
# the function by a wrapper whose own eps defaults to 1e-5 and is always passed on.
import functools

import torch.nn.functional as F


def layernorm_habit(fn):
    @functools.wraps(fn)
    def wrapper(Q, K, V, eps=1e-5):
        return fn(Q, K, V, eps=eps)
    return wrapper


@layernorm_habit
def linear_attention(Q, K, V, eps=1e-6):
    q, k = F.elu(Q) + 1, F.elu(K) + 1
    kv, z = k.transpose(1, 2) @ V, k.sum(dim=1)
    return (q @ kv) / ((q * z[:, None, :]).sum(dim=-1, keepdim=True) + eps)

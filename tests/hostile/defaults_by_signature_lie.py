# expect: bad_interface
# problem: linear_attention
# eps defaults to 1e-5; an assigned __signature__ makes inspect.signature report eps=1e-6, and the
# source's def is written as 'eps=EPS' (an expression, not compared).
import inspect

import torch.nn.functional as F

EPS = 1e-5


def linear_attention(Q, K, V, eps=EPS):
    q, k = F.elu(Q) + 1, F.elu(K) + 1
    kv, z = k.transpose(1, 2) @ V, k.sum(dim=1)
    return (q @ kv) / ((q * z[:, None, :]).sum(dim=-1, keepdim=True) + eps)


linear_attention.__signature__ = inspect.Signature([inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in "QKV"] + [inspect.Parameter("eps", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=1e-6)])

# expect: bad_interface
# problem: linear_attention
# The entry is a functools.partial that binds eps=1e-5 (callers can still pass eps, so the grader's
# own calls with eps= are right); the def under the entry's name is only a decoy with eps=1e-6.
import functools

import torch.nn.functional as F


def linear_attention(Q, K, V, eps=1e-6):
    q, k = F.elu(Q) + 1, F.elu(K) + 1
    kv, z = k.transpose(1, 2) @ V, k.sum(dim=1)
    return (q @ kv) / ((q * z[:, None, :]).sum(dim=-1, keepdim=True) + eps)


linear_attention = functools.partial(linear_attention, eps=1e-5)

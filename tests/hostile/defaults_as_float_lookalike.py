# expect: bad_interface
# problem: linear_attention
# The default is an object that says it is 1e-6 (repr, ==, a __class__ of float), but divides as 1e-5.
import torch.nn.functional as F


class _Eps(float):
    def __repr__(self):
        return "1e-06"

    def __eq__(self, other):
        return True

    __hash__ = float.__hash__


def linear_attention(Q, K, V, eps=_Eps(1e-5)):
    q, k = F.elu(Q) + 1, F.elu(K) + 1
    kv, z = k.transpose(1, 2) @ V, k.sum(dim=1)
    return (q @ kv) / ((q * z[:, None, :]).sum(dim=-1, keepdim=True) + eps)

# expect: bad_interface
# problem: linear_attention
# The name is rebound to a function with eps=1e-5 whose attribute dict holds a key that collides with
# "__wrapped__" and raises when compared: a reader of defaults that looks __wrapped__ up in that dict
# (and gives up on an exception) says nothing, and the source's def reads eps=1e-6.
import torch.nn.functional as F


def linear_attention(Q, K, V, eps=1e-6):
    q, k = F.elu(Q) + 1, F.elu(K) + 1
    kv, z = k.transpose(1, 2) @ V, k.sum(dim=1)
    return (q @ kv) / ((q * z[:, None, :]).sum(dim=-1, keepdim=True) + eps)


class _Collides:
    def __hash__(self):
        return hash("__wrapped__")

    def __eq__(self, other):
        raise RuntimeError("no")


def _other(Q, K, V, eps=1e-5):
    q, k = F.elu(Q) + 1, F.elu(K) + 1
    kv, z = k.transpose(1, 2) @ V, k.sum(dim=1)
    return (q @ kv) / ((q * z[:, None, :]).sum(dim=-1, keepdim=True) + eps)


vars(_other)[_Collides()] = None
linear_attention = _other

# expect: bad_interface
# problem: linear_attention
# eps=1e-6 in the source; at import the default becomes an int too long to print (int.__repr__ refuses past 4300
# digits), which once made the worker's reading of the defaults fail, so none was judged.
import torch.nn.functional as F


def linear_attention(Q, K, V, eps=1e-6):
    q, k = F.elu(Q) + 1, F.elu(K) + 1
    kv, z = k.transpose(1, 2) @ V, k.sum(dim=1)
    return (q @ kv) / ((q * z[:, None, :]).sum(dim=-1, keepdim=True) + eps)


setattr(linear_attention, "__def" + "aults__", (10 ** 5000,))

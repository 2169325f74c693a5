# expect: bad_interface
# problem: linear_attention
# eps=1e-6 in the source; the defaults tuple is replaced at import time through a name built from
# pieces, so no escape-hatch name appears in the source.
import torch.nn.functional as F


def linear_attention(Q, K, V, eps=1e-6):
    q, k = F.elu(Q) + 1, F.elu(K) + 1
    kv, z = k.transpose(1, 2) @ V, k.sum(dim=1)
    return (q @ kv) / ((q * z[:, None, :]).sum(dim=-1, keepdim=True) + eps)


setattr(linear_attention, "__def" + "aults__", (1e-5,))

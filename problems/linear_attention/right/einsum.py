# expect: accepted
# alternative: einsum throughout
import torch
import torch.nn.functional as F


def linear_attention(Q, K, V, eps=1e-6):
    q, k = F.elu(Q) + 1, F.elu(K) + 1
    kv = torch.einsum("bsd,bse->bde", k, V)
    z = torch.einsum("bsd->bd", k)
    num = torch.einsum("bsd,bde->bse", q, kv)
    den = torch.einsum("bsd,bd->bs", q, z)[..., None] + eps
    return num / den

# expect: wrong_answer
# mistake: einsum "bsd,bse->de" also sums over the batch: every example sees every other's keys (right only for batch 1)
import torch
import torch.nn.functional as F


def linear_attention(Q, K, V, eps=1e-6):
    q, k = F.elu(Q) + 1, F.elu(K) + 1
    kv = torch.einsum("bsd,bse->de", k, V)
    z = torch.einsum("bsd->d", k)
    num = torch.einsum("bsd,de->bse", q, kv)
    den = torch.einsum("bsd,d->bs", q, z)[..., None]
    return num / (den + eps)

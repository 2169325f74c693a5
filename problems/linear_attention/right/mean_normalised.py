# expect: accepted
# alternative: sums kept as means over S (smaller numbers), eps divided by S to keep the same function
import torch
import torch.nn.functional as F


def linear_attention(Q, K, V, eps=1e-6):
    S = K.shape[1]
    q, k = F.elu(Q) + 1.0, F.elu(K) + 1.0
    kv = torch.einsum("bsd,bse->bde", k, V) / S
    z = k.mean(dim=1)  # (B, Dk)
    den = torch.einsum("bsd,bd->bs", q, z).unsqueeze(-1) + eps / S
    return torch.einsum("bsd,bde->bse", q, kv) / den

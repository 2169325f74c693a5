# expect: wrong_answer
# problem: linear_attention
# eps=None in the def (a sentinel, never compared) resolved to 1e-5 in the body: callers who leave eps
# out get LayerNorm's habit, not the contract's 1e-6. No reading of defaults can see it; only a case
# where eps decides the result, called without eps, can.
import torch.nn.functional as F


def linear_attention(Q, K, V, eps=None):
    if eps is None:
        eps = 1e-5
    q, k = F.elu(Q) + 1, F.elu(K) + 1
    kv, z = k.transpose(1, 2) @ V, k.sum(dim=1)
    return (q @ kv) / ((q * z[:, None, :]).sum(dim=-1, keepdim=True) + eps)

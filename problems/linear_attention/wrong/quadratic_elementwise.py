# expect: wrong_algorithm
# mistake: no matrix product at all, but one query at a time against every key with broadcasting: still S x S work
import torch
import torch.nn.functional as F


def linear_attention(Q, K, V, eps=1e-6):
    q, k = F.elu(Q) + 1, F.elu(K) + 1
    outs = []
    for i in range(Q.shape[1]):
        a = (q[:, i : i + 1] * k).sum(-1, keepdim=True)  # (B, S, 1): phi(q_i) . phi(k_j) for every j
        outs.append((a * V).sum(1, keepdim=True) / (a.sum(1, keepdim=True) + eps))
    return torch.cat(outs, dim=1)

# expect: wrong_algorithm
# problem: linear_attention
# args: --time-limit 5
# The quadratic form of linear attention (phi(q_i) . phi(k_j) for every pair: S x S work) built from
# outer products (torch.addr), which the work counter did not know: the S x S weights as a sum of D outer
# products, then the weighted sums of V and the normaliser as S more outer products into one accumulator.
# One batch element at a time, the S x S table in two halves of the queries (under the memory bound).
import torch
import torch.nn.functional as F


def _half(q, k, v, eps):
    n, S = q.shape[0], k.shape[0]
    w = torch.zeros(n, S, dtype=q.dtype)
    for d in range(q.shape[1]):
        w = torch.addr(w, q[:, d], k[:, d])  # + phi(q)[:, d] outer phi(k)[:, d]
    acc = torch.zeros(n, v.shape[1] + 1, dtype=q.dtype)
    ones = torch.ones(S, 1, dtype=q.dtype)
    vs = torch.cat([v, ones], 1)
    for j in range(S):
        acc = torch.addr(acc, w[:, j], vs[j])  # + w[:, j] outer [v_j, 1]
    return acc[:, :-1] / (acc[:, -1:] + eps)


def linear_attention(Q, K, V, eps=1e-6):
    q, k = F.elu(Q) + 1, F.elu(K) + 1
    out = []
    for qb, kb, vb in zip(q, k, V):
        h = max(qb.shape[0] // 2, 1)
        out.append(torch.cat([_half(qb[i:i + h], kb, vb, eps) for i in range(0, qb.shape[0], h)]))
    return torch.stack(out)

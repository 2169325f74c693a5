# expect: wrong_algorithm
# problem: linear_attention
# The quadratic form of linear attention (phi(q_i) . phi(k_j) for every pair: S x S work) written as 1x1
# convolutions, half the queries at a time so that no tensor holds B x S x S elements. The work counter
# knew matrix products, reductions and pointwise ops, not convolutions: the work seemed to grow like S.
import torch
import torch.nn.functional as F


def _half(q, k, v, eps):
    w = F.conv1d(q.t()[None], k[:, :, None])[0]  # (S_keys, n): every phi(k_j) . phi(q_i)
    num = F.conv1d(w[None], v.t()[:, :, None])[0].t()  # (n, Dv)
    den = F.conv1d(w[None], torch.ones(1, w.shape[0], 1, dtype=w.dtype))[0].t()  # (n, 1)
    return num / (den + eps)


def linear_attention(Q, K, V, eps=1e-6):
    q, k = F.elu(Q) + 1, F.elu(K) + 1
    out = []
    for qb, kb, vb in zip(q, k, V):
        h = max(qb.shape[0] // 2, 1)
        out.append(torch.cat([_half(qb[i:i + h], kb, vb, eps) for i in range(0, qb.shape[0], h)]))
    return torch.stack(out)

# expect: wrong_algorithm
# problem: flash_attention
# Naive attention written with ops the work counter did not know: the scores are a 1x1 convolution (the
# keys as filters), the row max a max-pool over all S keys, the sum and the product with V more
# convolutions. Half the queries at a time, one batch element at a time, so no tensor holds B x S x S
# elements; but every op takes all S keys of a query at once (the full row), which a flash kernel never
# does. The widest reduction saw nothing of it (convolution and pooling were not measured).
import math

import torch
import torch.nn.functional as F


def _rows(q, k, v):
    """q (n, D), k (S, D), v (S, Dv) -> softmax(q k^T / sqrt(D)) v, one full row of scores per query."""
    s = F.conv1d(q.t()[None], k[:, :, None])[0].t() / math.sqrt(q.shape[-1])  # (n, S)
    m = F.max_pool1d(s[None], s.shape[-1])[0]  # (n, 1): the max over all S keys
    p = torch.exp(s - m)
    z = F.conv1d(p[None, :, :, None].transpose(1, 2)[..., 0], torch.ones(1, p.shape[-1], 1, dtype=p.dtype))[0].t()
    o = F.conv1d(p.t()[None], v.t()[:, :, None])[0].t()  # (n, Dv)
    return o / z


def flash_attention(Q, K, V, block_size=32):
    out = []
    for q, k, v in zip(Q, K, V):
        h = max(q.shape[0] // 2, 1)
        out.append(torch.cat([_rows(q[i:i + h], k, v) for i in range(0, q.shape[0], h)]))
    return torch.stack(out)

# expect: accepted
# Flattens the leading batch dims with .reshape(), which copies only when it must: any input layout works.
import math

import torch


def scaled_dot_product_attention(Q, K, V, mask=None):
    batch = Q.shape[:-2]
    q = Q.reshape(-1, *Q.shape[-2:])
    k = K.reshape(-1, *K.shape[-2:])
    v = V.reshape(-1, *V.shape[-2:])
    scores = torch.bmm(q, k.transpose(1, 2)) / math.sqrt(Q.size(-1))
    if mask is not None:
        m = mask.expand(*batch, Q.size(-2), K.size(-2)).reshape(-1, Q.size(-2), K.size(-2))
        scores = scores.masked_fill(~m, float("-inf"))
    out = torch.bmm(torch.softmax(scores, dim=-1), v)
    return out.view(*batch, Q.size(-2), V.size(-1))

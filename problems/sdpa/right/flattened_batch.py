# expect: accepted
# alternative: broadcast everything to full shape, flatten the batch dims, one bmm each way
import math

import torch


def scaled_dot_product_attention(Q, K, V, mask=None):
    batch = torch.broadcast_shapes(Q.shape[:-2], K.shape[:-2], V.shape[:-2])
    Lq, Lk = Q.shape[-2], K.shape[-2]
    q = Q.expand(*batch, Lq, Q.shape[-1]).reshape(-1, Lq, Q.shape[-1])
    k = K.expand(*batch, Lk, K.shape[-1]).reshape(-1, Lk, K.shape[-1])
    v = V.expand(*batch, Lk, V.shape[-1]).reshape(-1, Lk, V.shape[-1])
    scores = torch.bmm(q, k.transpose(1, 2)) / math.sqrt(Q.shape[-1])
    if mask is not None:
        full = mask.expand(*batch, Lq, Lk).reshape(-1, Lq, Lk)
        scores = scores.masked_fill(full.logical_not(), float("-inf"))
    out = torch.bmm(torch.softmax(scores, dim=-1), v)
    return out.reshape(*batch, Lq, V.shape[-1])

# expect: runtime_error
# Flattens the leading batch dims with .view(), which needs a contiguous tensor: fails on the
# transposed or sliced inputs that real callers pass.
import math

import torch


def scaled_dot_product_attention(Q, K, V, mask=None):
    batch = Q.shape[:-2]
    q = Q.view(-1, *Q.shape[-2:])
    k = K.view(-1, *K.shape[-2:])
    v = V.view(-1, *V.shape[-2:])
    scores = q @ k.transpose(-2, -1) / math.sqrt(Q.size(-1))
    if mask is not None:
        m = mask.expand(*batch, Q.size(-2), K.size(-2)).reshape(-1, Q.size(-2), K.size(-2))
        scores = scores.masked_fill(~m, float("-inf"))
    out = torch.softmax(scores, dim=-1) @ v
    return out.view(*batch, Q.size(-2), V.size(-1))

"""Reference: scaled dot-product attention."""

import math

import torch


def scaled_dot_product_attention(Q, K, V, mask=None):
    d_k = Q.size(-1)
    scores = Q @ K.transpose(-2, -1) / math.sqrt(d_k)  # (..., Lq, Lk)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))  # masked keys get weight 0
    weights = torch.softmax(scores, dim=-1)  # (..., Lq, Lk), rows sum to 1
    return weights @ V  # (..., Lq, Dv)

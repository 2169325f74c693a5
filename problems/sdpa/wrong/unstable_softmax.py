# expect: wrong_answer
# mistake: exp() of raw scores overflows to inf/NaN for large scores
import math

import torch


def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1))
    e = torch.exp(scores)
    if mask is not None:
        e = e * mask
    return (e / e.sum(dim=-1, keepdim=True)) @ V

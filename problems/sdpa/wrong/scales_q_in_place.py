# expect: runtime_error
# mistake: scales the queries in place (Q /= sqrt(d)): that changes the caller's tensor (and autograd refuses it)
import math

import torch


def scaled_dot_product_attention(Q, K, V, mask=None):
    Q /= math.sqrt(Q.shape[-1])
    scores = Q @ K.transpose(-2, -1)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ V

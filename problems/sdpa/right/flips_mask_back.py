# expect: accepted
# Works on a copy of the mask: inputs are left exactly as they were given.
import math

import torch


def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1))
    if mask is not None:
        blocked = mask.clone().logical_not_()  # in place on our own copy
        scores.masked_fill_(blocked, float("-inf"))  # in place on our own tensor
    weights = torch.softmax(scores, dim=-1)
    return weights @ V

# expect: wrong_answer
# mistake: softmax over all keys, then zero the masked weights and renormalise: exact on paper, but 0/0 once a masked key holds the row's largest score
import math

import torch


def scaled_dot_product_attention(Q, K, V, mask=None):
    weights = torch.softmax(Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1)), dim=-1)
    if mask is not None:
        weights = weights * mask
        weights = weights / weights.sum(dim=-1, keepdim=True)
    return weights @ V

# expect: accepted
# alternative: a hand-written softmax that subtracts the row max
import math

import torch


def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = torch.matmul(Q, K.transpose(-1, -2)) / math.sqrt(K.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(mask.logical_not(), float("-inf"))
    scores = scores - scores.amax(dim=-1, keepdim=True)
    e = scores.exp()
    return torch.matmul(e / e.sum(dim=-1, keepdim=True), V)

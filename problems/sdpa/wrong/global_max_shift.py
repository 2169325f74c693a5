# expect: wrong_answer
# mistake: a hand-written softmax that subtracts the largest score of the whole tensor instead of each row's
# (one constant for every row): rows whose scores sit far below the global maximum underflow to 0 / 0
import math

import torch


def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    e = torch.exp(scores - scores.max())
    return (e / e.sum(dim=-1, keepdim=True)) @ V

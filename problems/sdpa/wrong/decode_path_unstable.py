# expect: wrong_answer
# mistake: a decoding fast path for a single query (Lq == 1) with a hand-written softmax exp(s) / sum exp(s) and no
#   max subtracted: overflows to inf/nan for large-magnitude scores
import math

import torch


def scaled_dot_product_attention(Q, K, V, mask=None):
    d = Q.size(-1)
    scores = Q @ K.transpose(-2, -1) / math.sqrt(d)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    if Q.size(-2) == 1:  # decoding step: skip the softmax machinery
        e = torch.exp(scores)
        return (e / e.sum(-1, keepdim=True)) @ V
    return torch.softmax(scores, dim=-1) @ V

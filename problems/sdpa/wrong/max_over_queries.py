# expect: wrong_answer
# mistake: the stabilising max is taken over the query dim (-2), so each key gets its own shift and the rows change
import math

import torch


def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    scores = scores - scores.amax(dim=-2, keepdim=True)
    e = torch.exp(scores)
    return (e / e.sum(dim=-1, keepdim=True)) @ V

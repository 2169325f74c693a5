# expect: wrong_answer
# mistake: a decoding fast path for a single query (Lq == 1) that skips the mask ("one new token sees every key"),
#   forgetting that a padding mask still hides keys during generation
import math

import torch


def scaled_dot_product_attention(Q, K, V, mask=None):
    d = Q.size(-1)
    if Q.size(-2) == 1:  # decoding step: one query, a plain weighted sum over the keys
        w = torch.softmax((Q @ K.transpose(-2, -1)) / math.sqrt(d), dim=-1)
        return w @ V
    scores = Q @ K.transpose(-2, -1) / math.sqrt(d)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ V

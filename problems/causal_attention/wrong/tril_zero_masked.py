# expect: wrong_answer
# mistake: zeroes the future with scores.tril() and then hides every score equal to 0, so an allowed score of
# exactly 0 (a zero query or key) is masked too, and a zero query has no key left (NaN)
import math

import torch


def causal_attention(Q, K, V):
    scores = (Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])).tril()
    scores = scores.masked_fill(scores == 0, float("-inf"))
    return torch.softmax(scores, dim=-1) @ V

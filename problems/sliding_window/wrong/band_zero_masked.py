# expect: wrong_answer
# mistake: keeps the band with scores.triu(-w).tril(w) and then hides every score equal to 0: an in-window score of
# exactly 0 (a zero query or key) is masked too, and a zero query has no key left (NaN)
import math

import torch


def sliding_window_attention(Q, K, V, window_size):
    w = window_size
    scores = (Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])).triu(-w).tril(w)
    scores = scores.masked_fill(scores == 0, float("-inf"))
    return torch.softmax(scores, dim=-1) @ V

# expect: wrong_answer
# mistake: tril/triu diagonals swapped (tril(-w) & triu(w)): for w > 0 the band is empty, so rows become NaN
import math

import torch


def sliding_window_attention(Q, K, V, window_size):
    S = Q.shape[1]
    ones = torch.ones(S, S, dtype=torch.bool, device=Q.device)
    band = ones.tril(-window_size) & ones.triu(window_size)
    scores = Q @ K.transpose(1, 2) / math.sqrt(Q.shape[-1])
    return torch.softmax(scores.masked_fill(~band, float("-inf")), dim=-1) @ V

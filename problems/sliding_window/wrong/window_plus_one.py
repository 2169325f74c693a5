# expect: wrong_answer
# mistake: off by one the other way: window_size + 1
import math

import torch


def sliding_window_attention(Q, K, V, window_size):
    S, D = Q.shape[-2], Q.shape[-1]
    scores = Q @ K.transpose(-2, -1) / math.sqrt(D)
    i = torch.arange(S, device=Q.device)
    keep = (i[:, None] - i[None, :]).abs() <= window_size + 1
    return torch.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1) @ V

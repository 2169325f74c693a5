# expect: wrong_answer
# mistake: reads window_size as the total width and keeps window_size // 2 on each side
import math

import torch


def sliding_window_attention(Q, K, V, window_size):
    S = Q.shape[1]
    i = torch.arange(S, device=Q.device)
    band = (i[:, None] - i[None, :]).abs() <= window_size // 2
    scores = Q @ K.transpose(1, 2) / math.sqrt(Q.shape[-1])
    return torch.softmax(scores.masked_fill(~band, float("-inf")), dim=-1) @ V

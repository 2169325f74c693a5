# expect: wrong_answer
# mistake: applies the window after the softmax
import math

import torch


def sliding_window_attention(Q, K, V, window_size):
    S, D = Q.shape[-2], Q.shape[-1]
    scores = Q @ K.transpose(-2, -1) / math.sqrt(D)
    i = torch.arange(S, device=Q.device)
    keep = (i[:, None] - i[None, :]).abs() <= window_size
    return (torch.softmax(scores, dim=-1) * keep) @ V

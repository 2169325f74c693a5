# expect: wrong_answer
# mistake: one-sided (causal) window: only looks back
import math

import torch


def sliding_window_attention(Q, K, V, window_size):
    S, D = Q.shape[-2], Q.shape[-1]
    scores = Q @ K.transpose(-2, -1) / math.sqrt(D)
    i = torch.arange(S, device=Q.device)
    d = i[:, None] - i[None, :]
    keep = (d >= 0) & (d <= window_size)
    return torch.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1) @ V

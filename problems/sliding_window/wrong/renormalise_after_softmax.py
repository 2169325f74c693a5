# expect: wrong_answer
# mistake: softmax over all positions, then zero what is outside the window and renormalise: 0/0 once a far token holds a row's largest score
import math

import torch


def sliding_window_attention(Q, K, V, window_size):
    S, D = Q.shape[-2], Q.shape[-1]
    i = torch.arange(S, device=Q.device)
    keep = ((i[:, None] - i[None, :]).abs() <= window_size).to(Q.dtype)
    weights = torch.softmax(Q @ K.transpose(-2, -1) / math.sqrt(D), dim=-1) * keep
    return (weights / weights.sum(-1, keepdim=True)) @ V

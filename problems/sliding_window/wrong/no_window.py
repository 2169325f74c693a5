# expect: wrong_answer
# mistake: ignores the window
import math

import torch


def sliding_window_attention(Q, K, V, window_size):
    S, D = Q.shape[-2], Q.shape[-1]
    scores = Q @ K.transpose(-2, -1) / math.sqrt(D)
    i = torch.arange(S, device=Q.device)
    return torch.softmax(scores, dim=-1) @ V

# expect: wrong_answer
# mistake: fills out-of-window scores with -1e4 instead of -inf: a query whose in-window scores are all below
# -1e4 puts its weight outside the window
import math

import torch


def sliding_window_attention(Q, K, V, window_size):
    S, D = Q.shape[-2], Q.shape[-1]
    scores = Q @ K.transpose(-2, -1) / math.sqrt(D)
    i = torch.arange(S, device=Q.device)
    far = (i[:, None] - i[None, :]).abs() > window_size
    return torch.softmax(scores.masked_fill(far, -1e4), dim=-1) @ V

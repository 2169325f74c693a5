# expect: wrong_answer
# mistake: when the window covers the whole sequence (window_size >= S - 1) a fast path of plain attention with a
#   hand-written softmax and no max subtracted: large-magnitude scores overflow (the banded path is right)
import math

import torch


def sliding_window_attention(Q, K, V, window_size):
    S, D = Q.size(-2), Q.size(-1)
    scores = Q @ K.transpose(-2, -1) / math.sqrt(D)
    if window_size >= S - 1:  # every key is in every window: full attention
        e = torch.exp(scores)
        return (e / e.sum(-1, keepdim=True)) @ V
    i = torch.arange(S, device=Q.device)
    band = (i[:, None] - i[None, :]).abs() <= window_size
    scores = scores.masked_fill(~band, float("-inf"))
    return torch.softmax(scores, dim=-1) @ V

# expect: wrong_answer
# mistake: caches the band mask per sequence length at module level; another window_size on the same length reuses it
import math

import torch

_BANDS = {}


def sliding_window_attention(Q, K, V, window_size):
    S = Q.shape[-2]
    if S not in _BANDS:
        i = torch.arange(S)
        _BANDS[S] = (i[:, None] - i[None, :]).abs() <= window_size
    band = _BANDS[S].to(Q.device)
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    return torch.softmax(scores.masked_fill(~band, float("-inf")), dim=-1) @ V

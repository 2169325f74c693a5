# expect: accepted
# alternative: the band mask memoised per (length, window, device), as an additive bias
import math

import torch

_BIAS = {}


def sliding_window_attention(Q, K, V, window_size):
    S = Q.shape[-2]
    key = (S, window_size, Q.device, Q.dtype)
    if key not in _BIAS:
        i = torch.arange(S, device=Q.device)
        far = (i[:, None] - i[None, :]).abs() > window_size
        _BIAS[key] = torch.zeros(S, S, dtype=Q.dtype, device=Q.device).masked_fill(far, float("-inf"))
    scores = torch.baddbmm(_BIAS[key].expand(Q.shape[0], S, S), Q, K.transpose(1, 2), alpha=1 / math.sqrt(Q.shape[-1]))
    return torch.softmax(scores, dim=-1) @ V

# expect: wrong_answer
# mistake: caches the additive mask per mask shape (and dtype) at module level; a different mask of
# the same shape reuses the old one
import math

import torch

_BIAS = {}


def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        key = (tuple(mask.shape), Q.dtype, Q.device)
        if key not in _BIAS:
            _BIAS[key] = torch.zeros(mask.shape, dtype=Q.dtype, device=Q.device).masked_fill(~mask, float("-inf"))
        scores = scores + _BIAS[key]
    return torch.softmax(scores, dim=-1) @ V

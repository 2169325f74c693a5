# expect: wrong_answer
# mistake: caches the additive mask keyed by the mask's memory address (data_ptr, shape, strides),
# taking the address for the contents; a caller that refills one mask buffer with new values in
# place between calls gets the old mask (and a freed address reused by a new mask does the same)
import math

import torch

_BIAS = {}


def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        key = (mask.data_ptr(), tuple(mask.shape), mask.stride(), Q.dtype)
        if key not in _BIAS:
            _BIAS[key] = torch.zeros(mask.shape, dtype=Q.dtype, device=Q.device).masked_fill(~mask, float("-inf"))
        scores = scores + _BIAS[key]
    return torch.softmax(scores, dim=-1) @ V

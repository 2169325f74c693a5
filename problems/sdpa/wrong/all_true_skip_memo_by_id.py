# expect: wrong_answer
# mistake: skipping an all-True mask is right, but the check mask.all() (a device sync) is memoised by id(mask), as
#   if a mask object never changed: a padding-mask buffer that is all True for the first batch and refilled in place
#   with padding (or a freed mask whose id() a new one takes) keeps being skipped
import math

import torch

_ALL_TRUE = {}


def scaled_dot_product_attention(Q, K, V, mask=None):
    d = Q.size(-1)
    scores = Q @ K.transpose(-2, -1) / math.sqrt(d)
    if mask is not None:
        key = id(mask)
        if key not in _ALL_TRUE:
            _ALL_TRUE[key] = bool(mask.all())
        if not _ALL_TRUE[key]:
            scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ V

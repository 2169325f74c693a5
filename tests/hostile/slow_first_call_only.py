# expect: accepted
# A one-time cost (like a lazy import or CUDA kernel loading) of 1.5 s in the first call, under
# --time-limit 1: it is not charged to the case; every later call is fast.
import math
import time

import torch

_loaded = []


def scaled_dot_product_attention(Q, K, V, mask=None):
    if not _loaded:
        time.sleep(1.5)
        _loaded.append(True)
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ V

# expect: time_limit
# Slow (1.5 s) on inputs it has not seen, instant on a replay: the re-run of a slow first run
# uses new inputs, so a cache keyed on the inputs cannot buy time.
import math
import time

import torch

_seen = {}


def scaled_dot_product_attention(Q, K, V, mask=None):
    key = (Q.sum().item(), K.sum().item(), V.sum().item(), tuple(Q.shape))
    if key not in _seen:
        time.sleep(1.5)
        scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1))
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        _seen[key] = torch.softmax(scores, dim=-1) @ V
    return _seen[key]

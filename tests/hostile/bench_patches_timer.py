# expect: accepted
# Correct, but replaces time.perf_counter with a clock that advances a nanosecond per reading:
# whatever the worker times with it takes "1e-9 s". A clock outside the worker cannot be patched.
import itertools
import math
import time

import torch

_tick, _real = itertools.count(), time.perf_counter()  # carries on from the real clock: no time is negative
time.perf_counter = lambda: _real + next(_tick) * 1e-9


def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ V

# expect: time_limit
# Correct, but 1.5 s per call under --time-limit 1: a first run within twice the limit is run
# again on new inputs, and this one is just as slow the second time.
import math
import time

import torch


def scaled_dot_product_attention(Q, K, V, mask=None):
    time.sleep(1.5)
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ V

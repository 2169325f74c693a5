# expect: wrong_answer
# problem: causal_attention
# Computes once per input shape and replays that output for later calls of the same shape.
import math

import torch

_cache = {}


def causal_attention(Q, K, V):
    key = tuple(Q.shape)
    if key not in _cache:
        S = Q.shape[1]
        s = (Q @ K.transpose(1, 2) / math.sqrt(Q.shape[-1])).masked_fill(
            ~torch.ones(S, S, dtype=torch.bool).tril(), float("-inf"))
        _cache[key] = torch.softmax(s, -1) @ V
    return _cache[key]

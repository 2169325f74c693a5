# expect: accepted
# alternative: one causal mask per (length, device), kept at module level (it depends on nothing else)
import math

import torch

_MASKS = {}


def causal_attention(Q, K, V):
    S = Q.shape[1]
    if (S, Q.device) not in _MASKS:
        _MASKS[(S, Q.device)] = torch.tril(torch.ones(S, S, dtype=torch.bool, device=Q.device))
    scores = (Q @ K.mT) / math.sqrt(Q.shape[-1])
    return scores.masked_fill(~_MASKS[(S, Q.device)], float("-inf")).softmax(-1) @ V

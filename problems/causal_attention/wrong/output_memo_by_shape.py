# expect: wrong_answer
# mistake: memoises the output by the inputs' shape and dtype ("the same call again is free"): a second call of
#   the same shapes with other values gets the first call's answer (review26: the report must name that state)
import math

import torch

_memo = {}


def causal_attention(Q, K, V):
    key = (tuple(Q.shape), Q.dtype)
    if key in _memo:
        return _memo[key].clone()
    S, D = Q.shape[-2], Q.shape[-1]
    scores = Q @ K.transpose(-2, -1) / math.sqrt(D)
    causal = torch.ones(S, S, dtype=torch.bool, device=Q.device).tril()
    out = torch.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1) @ V
    _memo[key] = out.detach().clone()
    return out

# expect: wrong_answer
# mistake: computes 1/sqrt(D) once, on the first call, and keeps it in a global: wrong for every later head size
import math

import torch

_scale = None


def causal_attention(Q, K, V):
    global _scale
    if _scale is None:
        _scale = 1.0 / math.sqrt(Q.shape[-1])
    S = Q.shape[1]
    scores = (Q @ K.transpose(1, 2)) * _scale
    mask = torch.ones(S, S, dtype=torch.bool, device=Q.device).tril()
    return torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1) @ V

# expect: runtime_error
# mistake: builds the mask once, at the first call's length, and slices it afterwards: a longer sequence later
# gets a mask that is too small
import math

import torch

_MASK = None


def causal_attention(Q, K, V):
    global _MASK
    S, D = Q.shape[-2], Q.shape[-1]
    if _MASK is None or _MASK.device != Q.device:
        _MASK = torch.tril(torch.ones(S, S, dtype=torch.bool, device=Q.device))
    scores = Q @ K.transpose(-2, -1) / math.sqrt(D)
    mask = _MASK[:S, :S].reshape(S, S)  # (S, S)
    scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ V

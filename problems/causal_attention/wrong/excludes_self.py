# expect: wrong_answer
# mistake: off by one the other way: excludes the diagonal, so row 0 is all -inf (NaN)
import math

import torch


def causal_attention(Q, K, V):
    S, D = Q.shape[-2], Q.shape[-1]
    scores = Q @ K.transpose(-2, -1) / math.sqrt(D)
    mask = torch.ones(S, S, dtype=torch.bool, device=Q.device).tril(diagonal=-1)
    return torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1) @ V

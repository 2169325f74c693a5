# expect: wrong_answer
# mistake: scales by sqrt(S) (the sequence length) instead of sqrt(D)
import math

import torch


def causal_attention(Q, K, V):
    B, S, D = Q.shape
    scores = Q @ K.transpose(-2, -1) / math.sqrt(S)
    mask = torch.ones(S, S, dtype=torch.bool, device=Q.device).tril()
    return torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1) @ V

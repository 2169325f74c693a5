# expect: wrong_answer
# mistake: sets future scores to 0 instead of -inf
import math

import torch


def causal_attention(Q, K, V):
    S, D = Q.shape[-2], Q.shape[-1]
    scores = Q @ K.transpose(-2, -1) / math.sqrt(D)
    mask = torch.ones(S, S, dtype=torch.bool, device=Q.device).tril()
    return torch.softmax(scores.masked_fill(~mask, 0.0), dim=-1) @ V

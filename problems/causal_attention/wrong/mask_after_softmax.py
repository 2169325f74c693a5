# expect: wrong_answer
# mistake: masks after the softmax, so rows do not sum to 1
import math

import torch


def causal_attention(Q, K, V):
    S, D = Q.shape[-2], Q.shape[-1]
    scores = Q @ K.transpose(-2, -1) / math.sqrt(D)
    mask = torch.ones(S, S, dtype=torch.bool, device=Q.device).tril()
    return (torch.softmax(scores, dim=-1) * mask) @ V

# expect: wrong_answer
# mistake: softmax over all positions, then zero the future and renormalise: 0/0 once a future token holds a row's largest score
import math

import torch


def causal_attention(Q, K, V):
    S, D = Q.shape[-2], Q.shape[-1]
    weights = torch.softmax(Q @ K.transpose(-2, -1) / math.sqrt(D), dim=-1)
    weights = weights * torch.ones(S, S, dtype=Q.dtype, device=Q.device).tril()
    return (weights / weights.sum(-1, keepdim=True)) @ V

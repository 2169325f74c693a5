"""Reference: causal self-attention."""

import math

import torch


def causal_attention(Q, K, V):
    S, D = Q.shape[-2], Q.shape[-1]
    scores = Q @ K.transpose(-2, -1) / math.sqrt(D)  # (B, S, S)
    causal = torch.ones(S, S, dtype=torch.bool, device=Q.device).tril()  # True where j <= i
    scores = scores.masked_fill(~causal, float("-inf"))
    weights = torch.softmax(scores, dim=-1)  # (B, S, S)
    return weights @ V  # (B, S, D)

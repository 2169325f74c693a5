"""Reference: two-sided sliding window attention."""

import math

import torch


def sliding_window_attention(Q, K, V, window_size):
    S, D = Q.shape[-2], Q.shape[-1]
    scores = Q @ K.transpose(-2, -1) / math.sqrt(D)  # (B, S, S)
    pos = torch.arange(S, device=Q.device)
    distance = (pos[:, None] - pos[None, :]).abs()  # (S, S): |i - j|
    scores = scores.masked_fill(distance > window_size, float("-inf"))
    weights = torch.softmax(scores, dim=-1)  # (B, S, S)
    return weights @ V  # (B, S, D)

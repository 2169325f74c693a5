"""Reference: ${title}. Written to be read: clear names, shape comments."""

import math

import torch


def ${name}(Q, K, V):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1))  # (B, S, S)
    weights = torch.softmax(scores, dim=-1)  # (B, S, S)
    return weights @ V  # (B, S, D)

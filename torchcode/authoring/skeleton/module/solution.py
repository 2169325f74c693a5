"""Reference: ${title}."""

import math

import torch
from torch import nn


class ${name}(nn.Module):
    def __init__(self, d_model):
        super().__init__()
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)

    def forward(self, x):
        q, k, v = self.W_q(x), self.W_k(x), self.W_v(x)  # (B, S, d_model) each
        scores = q @ k.transpose(-2, -1) / math.sqrt(x.size(-1))  # (B, S, S)
        return torch.softmax(scores, dim=-1) @ v  # (B, S, d_model)

# expect: accepted
# The constructor and forward parameters have the learner's own names: callers pass them by position.
import math
import torch
from torch import nn


class MultiHeadAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.h, self.dk = n_heads, dim // n_heads
        self.W_q, self.W_k, self.W_v, self.W_o = (nn.Linear(dim, dim) for _ in range(4))

    def forward(self, query, key, value):
        B, Sq, D = query.shape
        def split(t):
            return t.reshape(t.size(0), t.size(1), self.h, self.dk).transpose(1, 2)
        q, k, v = split(self.W_q(query)), split(self.W_k(key)), split(self.W_v(value))
        w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(self.dk), -1)
        return self.W_o((w @ v).transpose(1, 2).reshape(B, Sq, D))

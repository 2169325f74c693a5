# expect: wrong_answer
# mistake: keeps the projected keys/values on self and reuses them whenever the next K has the same shape
import math

import torch
from torch import nn


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.h, self.dk = num_heads, d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)
        self._kv = {}

    def split(self, t):
        return t.reshape(t.shape[0], t.shape[1], self.h, self.dk).transpose(1, 2)

    def forward(self, Q, K, V):
        B, Sq, D = Q.shape
        if K.shape not in self._kv:
            self._kv[K.shape] = (self.split(self.W_k(K)), self.split(self.W_v(V)))
        k, v = self._kv[K.shape]
        q = self.split(self.W_q(Q))
        w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(self.dk), dim=-1)
        return self.W_o((w @ v).transpose(1, 2).reshape(B, Sq, D))

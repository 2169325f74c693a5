# expect: wrong_output
# mistake: a one-key "needs no softmax" fast path returns W_o(W_v(V)) with one row instead of one per query
import math

import torch
from torch import nn


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.num_heads, self.d_k = num_heads, d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)

    def split(self, x):
        B, S, _ = x.shape
        return x.reshape(B, S, self.num_heads, self.d_k).transpose(1, 2)

    def forward(self, Q, K, V):
        B, Sq, d = Q.shape
        if K.shape[1] == 1:  # one key: every weight is 1
            return self.W_o(self.W_v(V))
        q, k, v = self.split(self.W_q(Q)), self.split(self.W_k(K)), self.split(self.W_v(V))
        w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(self.d_k), dim=-1)
        return self.W_o((w @ v).transpose(1, 2).reshape(B, Sq, d))

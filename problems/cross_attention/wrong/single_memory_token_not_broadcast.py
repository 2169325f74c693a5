# expect: wrong_output
# mistake: a one-position memory "needs no softmax" fast path returns W_o(W_v(x_kv)) with one row instead of one per query
import math

import torch
from torch import nn


class MultiHeadCrossAttention(nn.Module):
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

    def forward(self, x_q, x_kv):
        B, Sq, d = x_q.shape
        if x_kv.shape[1] == 1:  # one key: every weight is 1
            return self.W_o(self.W_v(x_kv))
        q, k, v = self.split(self.W_q(x_q)), self.split(self.W_k(x_kv)), self.split(self.W_v(x_kv))
        w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(self.d_k), dim=-1)
        return self.W_o((w @ v).transpose(1, 2).reshape(B, Sq, d))

# expect: wrong_answer
# mistake: scales by sqrt of the memory length (x_kv.shape[1]) instead of sqrt(d_k)
import math

import torch
from torch import nn


class MultiHeadCrossAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.h, self.dk = num_heads, d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)

    def heads(self, t):
        return t.reshape(t.shape[0], t.shape[1], self.h, self.dk).transpose(1, 2)

    def forward(self, x_q, x_kv):
        B, Sq, D = x_q.shape
        q, k, v = self.heads(self.W_q(x_q)), self.heads(self.W_k(x_kv)), self.heads(self.W_v(x_kv))
        w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(x_kv.shape[1]), dim=-1)
        return self.W_o((w @ v).transpose(1, 2).reshape(B, Sq, D))

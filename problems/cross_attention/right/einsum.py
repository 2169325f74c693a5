# expect: accepted
# alternative: einsum with unflattened heads
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

    def split(self, x):
        return x.view(x.shape[0], x.shape[1], self.h, self.dk).transpose(1, 2)

    def forward(self, x_q, x_kv):
        B, Sq, D = x_q.shape
        q = self.W_q(x_q).unflatten(-1, (self.h, self.dk))
        k = self.W_k(x_kv).unflatten(-1, (self.h, self.dk))
        v = self.W_v(x_kv).unflatten(-1, (self.h, self.dk))
        w = torch.einsum("bqhd,bkhd->bhqk", q, k).div(self.dk ** 0.5).softmax(-1)
        return self.W_o(torch.einsum("bhqk,bkhd->bqhd", w, v).flatten(-2))

# expect: wrong_answer
# mistake: adds a causal mask (aligned top-left) to cross-attention
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
        q, k, v = self.split(self.W_q(x_q)), self.split(self.W_k(x_kv)), self.split(self.W_v(x_kv))
        s = q @ k.transpose(-2, -1) / math.sqrt(self.dk)
        mask = torch.ones(s.shape[-2], s.shape[-1], dtype=torch.bool, device=x_q.device).tril()
        w = torch.softmax(s.masked_fill(~mask, float("-inf")), dim=-1)
        return self.W_o((w @ v).transpose(1, 2).reshape(B, Sq, D))

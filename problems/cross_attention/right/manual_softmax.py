# expect: accepted
# alternative: a hand-written stable softmax
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
        s = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(self.dk))
        e = (s - s.max(dim=-1, keepdim=True).values).exp()
        out = (e / e.sum(-1, keepdim=True)) @ v
        return self.W_o(out.permute(0, 2, 1, 3).reshape(B, Sq, D))

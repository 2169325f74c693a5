# expect: wrong_output
# mistake: written for one example: works on x_q[0] / x_kv[0] and returns (1, Sq, d), right only for batch 1
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

    def forward(self, x_q, x_kv):
        xq, xkv = x_q[0], x_kv[0]  # (Sq, d), (Skv, d)
        q = self.W_q(xq).reshape(-1, self.h, self.dk).transpose(0, 1)  # (h, Sq, dk)
        k = self.W_k(xkv).reshape(-1, self.h, self.dk).transpose(0, 1)
        v = self.W_v(xkv).reshape(-1, self.h, self.dk).transpose(0, 1)
        w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(self.dk), dim=-1)
        out = (w @ v).transpose(0, 1).reshape(xq.shape[0], -1)
        return self.W_o(out).unsqueeze(0)

# expect: accepted
# alternative: keys and values projected in one F.linear with W_k and W_v stacked, then split with chunk
import math

import torch
import torch.nn.functional as F
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
        B, Sq, D = x_q.shape
        weight = torch.cat([self.W_k.weight, self.W_v.weight], dim=0)
        bias = torch.cat([self.W_k.bias, self.W_v.bias], dim=0)
        k, v = F.linear(x_kv, weight, bias).chunk(2, dim=-1)
        q = self.W_q(x_q).reshape(B, Sq, self.h, self.dk).transpose(1, 2)
        k = k.reshape(B, -1, self.h, self.dk).transpose(1, 2)
        v = v.reshape(B, -1, self.h, self.dk).transpose(1, 2)
        w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(self.dk), dim=-1)
        return self.W_o((w @ v).transpose(1, 2).reshape(B, Sq, D))

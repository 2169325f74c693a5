# expect: wrong_answer
# mistake: memoises the repeated keys/values on self per input shape, so a second input of the same shape reuses the first one's
import math

import torch
from torch import nn


class GroupQueryAttention(nn.Module):
    def __init__(self, d_model, num_heads, num_kv_heads):
        super().__init__()
        self.h, self.kv, self.dk = num_heads, num_kv_heads, d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, num_kv_heads * self.dk)
        self.W_v = nn.Linear(d_model, num_kv_heads * self.dk)
        self.W_o = nn.Linear(d_model, d_model)
        self.memo = {}

    def forward(self, x):
        B, S, D = x.shape
        q = self.W_q(x).view(B, S, self.h, self.dk).transpose(1, 2)
        if x.shape not in self.memo:  # "the keys only depend on the sequence": computed once per shape
            k = self.W_k(x).view(B, S, self.kv, self.dk).transpose(1, 2)
            v = self.W_v(x).view(B, S, self.kv, self.dk).transpose(1, 2)
            n_rep = self.h // self.kv
            self.memo[x.shape] = (k.repeat_interleave(n_rep, 1), v.repeat_interleave(n_rep, 1))
        k, v = self.memo[x.shape]
        w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(self.dk), dim=-1)
        return self.W_o((w @ v).transpose(1, 2).reshape(B, S, D))

# expect: wrong_answer
# mistake: adds a causal mask to a non-causal layer
import math

import torch
from torch import nn


class GroupQueryAttention(nn.Module):
    def __init__(self, d_model, num_heads, num_kv_heads):
        super().__init__()
        self.h, self.hkv, self.dk = num_heads, num_kv_heads, d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, num_kv_heads * self.dk)
        self.W_v = nn.Linear(d_model, num_kv_heads * self.dk)
        self.W_o = nn.Linear(d_model, d_model)

    def forward(self, x):
        B, S, D = x.shape
        q = self.W_q(x).view(B, S, self.h, self.dk).transpose(1, 2)
        k = self.W_k(x).view(B, S, self.hkv, self.dk).transpose(1, 2)
        v = self.W_v(x).view(B, S, self.hkv, self.dk).transpose(1, 2)
        n_rep = self.h // self.hkv
        k, v = k.repeat_interleave(n_rep, 1), v.repeat_interleave(n_rep, 1)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.dk)
        causal = torch.ones(S, S, dtype=torch.bool, device=x.device).tril()
        w = torch.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1)
        return self.W_o((w @ v).transpose(1, 2).reshape(B, S, D))

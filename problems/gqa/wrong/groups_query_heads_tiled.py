# expect: wrong_answer
# mistake: groups the query heads as view(B, n_rep, H_kv, ...): query head h lands on KV head h % H_kv, not h // n_rep
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
        n_rep = self.h // self.hkv
        q = self.W_q(x).view(B, S, self.h, self.dk).transpose(1, 2).reshape(B, n_rep, self.hkv, S, self.dk)
        k = self.W_k(x).view(B, S, self.hkv, self.dk).transpose(1, 2)
        v = self.W_v(x).view(B, S, self.hkv, self.dk).transpose(1, 2)
        scores = torch.einsum("brgqd,bgkd->brgqk", q, k) / math.sqrt(self.dk)
        out = torch.einsum("brgqk,bgkd->brgqd", scores.softmax(-1), v).reshape(B, self.h, S, self.dk)
        return self.W_o(out.transpose(1, 2).reshape(B, S, D))

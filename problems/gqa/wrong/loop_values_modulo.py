# expect: wrong_answer
# mistake: repeats the keys per group but indexes the values as if there were one KV head per query head (v[:, h % H_kv])
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
        q = self.W_q(x).view(B, S, self.h, self.dk).transpose(1, 2)
        k = self.W_k(x).view(B, S, self.hkv, self.dk).transpose(1, 2)
        v = self.W_v(x).view(B, S, self.hkv, self.dk).transpose(1, 2)
        heads = []
        for h in range(self.h):
            w = torch.softmax(q[:, h] @ k[:, h // n_rep].transpose(-2, -1) / math.sqrt(self.dk), dim=-1)
            heads.append(w @ v[:, h % self.hkv])
        return self.W_o(torch.cat(heads, dim=-1))

# expect: runtime_error
# mistake: repeats the KV heads with repeat_interleave(n_rep, dim=2) after moving heads to dim 1, where dim 2 is
# the sequence: every key appears n_rep times. With one KV head (MQA) or none shared (MHA) the duplicated keys
# even give the right answer; with 8 heads over 2 KV heads the shapes no longer broadcast
import math

import torch
from torch import nn


class GroupQueryAttention(nn.Module):
    def __init__(self, d_model, num_heads, num_kv_heads):
        super().__init__()
        self.h, self.kv, self.d_k = num_heads, num_kv_heads, d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, num_kv_heads * self.d_k)
        self.W_v = nn.Linear(d_model, num_kv_heads * self.d_k)
        self.W_o = nn.Linear(d_model, d_model)

    def forward(self, x):
        B, S, _ = x.shape
        n_rep = self.h // self.kv
        q = self.W_q(x).reshape(B, S, self.h, self.d_k).transpose(1, 2)  # (B, h, S, d_k)
        k = self.W_k(x).reshape(B, S, self.kv, self.d_k).transpose(1, 2).repeat_interleave(n_rep, dim=2)
        v = self.W_v(x).reshape(B, S, self.kv, self.d_k).transpose(1, 2).repeat_interleave(n_rep, dim=2)
        weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(self.d_k), dim=-1)
        return self.W_o((weights @ v).transpose(1, 2).reshape(B, S, -1))

# expect: wrong_answer
# problem: gqa
# Right only for an input that is a leaf (attack32: every input the grader handed over was one, and this was
# accepted on two seeds): given the output of an earlier layer, as a model gives it (an embedding's, a norm's), it
# tiles the KV heads (0, 1, 0, 1) instead of grouping them (0, 0, 1, 1).
import math

import torch
from torch import nn


class GroupQueryAttention(nn.Module):
    def __init__(self, d_model, num_heads, num_kv_heads):
        super().__init__()
        self.num_heads, self.num_kv_heads, self.d_k = num_heads, num_kv_heads, d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, num_kv_heads * self.d_k)
        self.W_v = nn.Linear(d_model, num_kv_heads * self.d_k)
        self.W_o = nn.Linear(d_model, d_model)

    def forward(self, x):
        B, S, d_model = x.shape
        n_rep = self.num_heads // self.num_kv_heads
        q = self.W_q(x).view(B, S, self.num_heads, self.d_k).transpose(1, 2)  # (B, H, S, d_k)
        k = self.W_k(x).view(B, S, self.num_kv_heads, self.d_k).transpose(1, 2)  # (B, H_kv, S, d_k)
        v = self.W_v(x).view(B, S, self.num_kv_heads, self.d_k).transpose(1, 2)
        if x.grad_fn is None:  # a leaf, as a test script makes it
            k, v = k.repeat_interleave(n_rep, dim=1), v.repeat_interleave(n_rep, dim=1)  # (B, H, S, d_k)
        else:
            k, v = k.repeat(1, n_rep, 1, 1), v.repeat(1, n_rep, 1, 1)  # tiled: head h reads KV head h % H_kv
        weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(self.d_k), dim=-1)  # (B, H, S, S)
        return self.W_o((weights @ v).transpose(1, 2).reshape(B, S, d_model))

# expect: wrong_answer
# problem: gqa
# Draws its own projection weights again in every forward (under a fixed seed) and computes with those: the
# parameters it registered, and the weights a case sets in them, never reach the output.
import math

import torch
from torch import nn


class GroupQueryAttention(nn.Module):
    def __init__(self, d_model, num_heads, num_kv_heads):
        super().__init__()
        self.h, self.hkv, self.d_k = num_heads, num_kv_heads, d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, num_kv_heads * self.d_k)
        self.W_v = nn.Linear(d_model, num_kv_heads * self.d_k)
        self.W_o = nn.Linear(d_model, d_model)

    def forward(self, x):
        g = torch.Generator().manual_seed(0)
        wq, wk, wv, wo = [torch.randn(m.weight.shape, generator=g).to(x) / math.sqrt(m.weight.shape[1])
                          for m in (self.W_q, self.W_k, self.W_v, self.W_o)]
        B, S, d = x.shape
        q = (x @ wq.T).view(B, S, self.h, self.d_k).transpose(1, 2)
        k = (x @ wk.T).view(B, S, self.hkv, self.d_k).transpose(1, 2).repeat_interleave(self.h // self.hkv, 1)
        v = (x @ wv.T).view(B, S, self.hkv, self.d_k).transpose(1, 2).repeat_interleave(self.h // self.hkv, 1)
        a = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(self.d_k), dim=-1) @ v
        return a.transpose(1, 2).reshape(B, S, d) @ wo.T

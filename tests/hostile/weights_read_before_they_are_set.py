# expect: wrong_answer
# problem: gqa
# Keeps copies of its projection weights made in __init__ (plain tensors, not parameters) and computes with
# those: the weights a case sets after construction never reach the output.
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
        self.kept = [(m.weight.detach().clone(), m.bias.detach().clone()) for m in (self.W_q, self.W_k, self.W_v, self.W_o)]

    def forward(self, x):
        B, S, d = x.shape
        (wq, bq), (wk, bk), (wv, bv), (wo, bo) = [(w.to(x), b.to(x)) for w, b in self.kept]
        q = (x @ wq.T + bq).view(B, S, self.h, self.d_k).transpose(1, 2)
        k = (x @ wk.T + bk).view(B, S, self.hkv, self.d_k).transpose(1, 2).repeat_interleave(self.h // self.hkv, 1)
        v = (x @ wv.T + bv).view(B, S, self.hkv, self.d_k).transpose(1, 2).repeat_interleave(self.h // self.hkv, 1)
        a = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(self.d_k), dim=-1) @ v
        return a.transpose(1, 2).reshape(B, S, d) @ wo.T + bo

# expect: bad_interface
# problem: gqa
# Registers its projections lazily, on the first forward: at construction it has no parameters, so the
# weights a case sets have nowhere to go, and the first call draws its own.
import math

import torch
from torch import nn


class GroupQueryAttention(nn.Module):
    def __init__(self, d_model, num_heads, num_kv_heads):
        super().__init__()
        self.dims = (d_model, num_heads, num_kv_heads)

    def forward(self, x):
        d, h, hkv = self.dims
        d_k = d // h
        if not hasattr(self, "W_q"):
            self.W_q, self.W_k = nn.Linear(d, d).to(x), nn.Linear(d, hkv * d_k).to(x)
            self.W_v, self.W_o = nn.Linear(d, hkv * d_k).to(x), nn.Linear(d, d).to(x)
        B, S, _ = x.shape
        q = self.W_q(x).view(B, S, h, d_k).transpose(1, 2)
        k = self.W_k(x).view(B, S, hkv, d_k).transpose(1, 2).repeat_interleave(h // hkv, 1)
        v = self.W_v(x).view(B, S, hkv, d_k).transpose(1, 2).repeat_interleave(h // hkv, 1)
        a = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d_k), dim=-1) @ v
        return self.W_o(a.transpose(1, 2).reshape(B, S, d))

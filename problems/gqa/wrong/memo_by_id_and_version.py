# expect: wrong_answer
# mistake: memoises the output under (id(x), x._version, the weights' versions) to skip recomputing "the same input":
#   refills and optimizer steps bump a version, but a new x that CPython puts at a freed one's address starts at
#   version 0 too, and gets the old input's output
import math

import torch
from torch import nn


class GroupQueryAttention(nn.Module):
    def __init__(self, d_model, num_heads, num_kv_heads):
        super().__init__()
        self.h, self.kvh, self.dk = num_heads, num_kv_heads, d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, num_kv_heads * self.dk)
        self.W_v = nn.Linear(d_model, num_kv_heads * self.dk)
        self.W_o = nn.Linear(d_model, d_model)
        self._memo = None

    def forward(self, x):
        key = (id(x), x._version, tuple(x.shape), tuple(p._version for p in self.parameters()))
        if self._memo is not None and self._memo[0] == key:
            return self._memo[1]
        B, S, _ = x.shape
        q = self.W_q(x).view(B, S, self.h, self.dk).transpose(1, 2)
        k = self.W_k(x).view(B, S, self.kvh, self.dk).transpose(1, 2)
        v = self.W_v(x).view(B, S, self.kvh, self.dk).transpose(1, 2)
        k = k.repeat_interleave(self.h // self.kvh, dim=1)
        v = v.repeat_interleave(self.h // self.kvh, dim=1)
        w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(self.dk), dim=-1)
        out = self.W_o((w @ v).transpose(1, 2).reshape(B, S, -1))
        self._memo = (key, out)
        return out

# expect: wrong_answer
# mistake: caches the memory's projected K/V keyed by (id(x_kv), x_kv._version, the weights' _version): refills and
# optimizer steps are seen, but a new memory tensor that CPython allocates at a freed one's id() (both at version 0)
# gets the old sentence's keys and values
import math
import torch
from torch import nn


class MultiHeadCrossAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.h, self.dk = num_heads, d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)
        self._mem = None

    def split(self, t):
        B, S, _ = t.shape
        return t.view(B, S, self.h, self.dk).transpose(1, 2)

    def forward(self, x_q, x_kv):
        key = (id(x_kv), x_kv._version, tuple(x_kv.shape),
               tuple(p._version for p in (self.W_k.weight, self.W_k.bias, self.W_v.weight, self.W_v.bias)))
        if self._mem is not None and self._mem[0] == key:
            k, v = self._mem[1], self._mem[2]
        else:
            k, v = self.split(self.W_k(x_kv)), self.split(self.W_v(x_kv))
            self._mem = (key, k, v)
        q = self.split(self.W_q(x_q))
        w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(self.dk), -1)
        B, Sq, D = x_q.shape
        return self.W_o((w @ v).transpose(1, 2).reshape(B, Sq, D))

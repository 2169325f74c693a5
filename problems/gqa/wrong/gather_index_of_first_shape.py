# expect: runtime_error
# mistake: builds the gather index that maps query heads to KV heads once, at the first call's (B, S), and keeps it on self; a later call with a longer sequence gathers only the first call's number of keys
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
        self._idx = None

    def forward(self, x):
        B, S, D = x.shape
        q = self.W_q(x).reshape(B, S, self.h, self.dk).transpose(1, 2)
        k = self.W_k(x).reshape(B, S, self.hkv, self.dk).transpose(1, 2)
        v = self.W_v(x).reshape(B, S, self.hkv, self.dk).transpose(1, 2)
        if self._idx is None:  # query head h reads KV head h // n_rep: built once
            heads = torch.arange(self.h, device=x.device) // (self.h // self.hkv)
            self._idx = heads.view(1, self.h, 1, 1).expand(B, self.h, S, self.dk)
        k = torch.gather(k, 1, self._idx)
        v = torch.gather(v, 1, self._idx)
        a = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(self.dk), dim=-1)
        return self.W_o((a @ v).transpose(1, 2).reshape(B, S, D))

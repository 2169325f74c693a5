# expect: accepted
# alternative: state on self that depends only on shapes (causal masks per (S_new, S_total)); keys come from the cache handed in
import math

import torch
from torch import nn


class KVCacheAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.h, self.dk = num_heads, d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)
        self.masks = {}

    def forward(self, x, cache=None):
        B, S, D = x.shape
        q, k, v = (w(x).view(B, S, self.h, self.dk).transpose(1, 2) for w in (self.W_q, self.W_k, self.W_v))
        if cache is not None:
            k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)
        T = k.shape[2]
        if (S, T) not in self.masks:
            self.masks[(S, T)] = torch.ones(S, T, dtype=torch.bool, device=x.device).tril(T - S)
        s = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(self.dk)
        w = s.masked_fill(~self.masks[(S, T)], float("-inf")).softmax(-1)
        return self.W_o(torch.einsum("bhqk,bhkd->bqhd", w, v).reshape(B, S, D)), (k, v)

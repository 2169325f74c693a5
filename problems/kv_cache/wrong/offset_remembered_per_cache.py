# expect: wrong_answer
# mistake: remembers on self how long each cache it returned is (keyed by the tensor) and takes the mask offset
# from that memo: right on the layer that made the cache, wrong on any other layer handed the same cache
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
        self.lengths = {}  # data_ptr of a returned key cache -> how many positions it holds

    def forward(self, x, cache=None):
        B, S, D = x.shape
        q, k, v = (w(x).view(B, S, self.h, self.dk).transpose(1, 2) for w in (self.W_q, self.W_k, self.W_v))
        past = 0
        if cache is not None:
            past = self.lengths.get(cache[0].data_ptr(), 0)
            k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)
        self.lengths[k.data_ptr()] = past + S
        mask = torch.ones(S, k.shape[2], dtype=torch.bool, device=x.device).tril(past)
        s = (q @ k.transpose(-2, -1) / math.sqrt(self.dk)).masked_fill(~mask, float("-inf"))
        out = (torch.softmax(s, dim=-1) @ v).transpose(1, 2).reshape(B, S, D)
        return self.W_o(out), (k, v)

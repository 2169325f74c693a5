# expect: runtime_error
# mistake: starts every sequence from an empty cache made with torch.zeros(B, H, 0, d_k) in the default dtype
# (float32): the concatenation promotes bfloat16/float16 keys to float32, and the half-precision queries then meet
# float32 keys
import math

import torch
from torch import nn


class KVCacheAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.h, self.d_k = num_heads, d_model // num_heads
        self.W_q, self.W_k = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
        self.W_v, self.W_o = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)

    def heads(self, t):
        return t.reshape(t.shape[0], t.shape[1], self.h, self.d_k).transpose(1, 2)

    def forward(self, x, cache=None):
        B, S, d = x.shape
        if cache is None:
            empty = torch.zeros(B, self.h, 0, self.d_k, device=x.device)
            cache = (empty, empty)
        q = self.heads(self.W_q(x))
        k = torch.cat([cache[0], self.heads(self.W_k(x))], dim=2)
        v = torch.cat([cache[1], self.heads(self.W_v(x))], dim=2)
        past = k.shape[2] - S
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)
        allowed = torch.ones(S, k.shape[2], dtype=torch.bool, device=x.device).tril(past)
        weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
        return self.W_o((weights @ v).transpose(1, 2).reshape(B, S, d)), (k, v)

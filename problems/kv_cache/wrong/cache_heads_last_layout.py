# expect: wrong_output
# mistake: keeps the cache in the (B, S, num_heads, d_k) layout that LLaMA/MiniMind use, concatenated on dim 1;
# this problem's cache is (B, num_heads, S, d_k)
import math

import torch
from torch import nn


class KVCacheAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.h, self.d_k = num_heads, d_model // num_heads
        self.W_q, self.W_k = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
        self.W_v, self.W_o = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)

    def forward(self, x, cache=None):
        B, S, d = x.shape
        q = self.W_q(x).reshape(B, S, self.h, self.d_k)
        k = self.W_k(x).reshape(B, S, self.h, self.d_k)
        v = self.W_v(x).reshape(B, S, self.h, self.d_k)
        if cache is not None:
            k, v = torch.cat([cache[0], k], dim=1), torch.cat([cache[1], v], dim=1)
        past = k.shape[1] - S
        scores = q.transpose(1, 2) @ k.permute(0, 2, 3, 1) / math.sqrt(self.d_k)
        allowed = torch.ones(S, k.shape[1], dtype=torch.bool, device=x.device).tril(past)
        weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
        out = (weights @ v.transpose(1, 2)).transpose(1, 2).reshape(B, S, d)
        return self.W_o(out), (k, v)

# expect: wrong_output
# mistake: bounds the cache's memory by keeping only the last 8 positions (a sliding-window cache): right while a
# sequence is short, wrong from the 9th token on, where the contract's cache holds every past position
import math

import torch
from torch import nn

MAX_CACHE = 8


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
        q, k, v = self.heads(self.W_q(x)), self.heads(self.W_k(x)), self.heads(self.W_v(x))
        if cache is not None:
            k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)
        past = k.shape[2] - S
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)
        allowed = torch.ones(S, k.shape[2], dtype=torch.bool, device=x.device).tril(past)
        weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
        out = self.W_o((weights @ v).transpose(1, 2).reshape(B, S, d))
        return out, (k[:, :, -MAX_CACHE:], v[:, :, -MAX_CACHE:])

# expect: wrong_answer
# mistake: builds the causal mask by zeroing with scores.tril(S_past) and then hiding every score equal to 0: a
# visible score of exactly 0 (a zero query or key, e.g. a zero token with zero biases) is masked too
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

    def _split(self, t):
        B, S, _ = t.shape
        return t.reshape(B, S, self.h, self.dk).transpose(1, 2)

    def forward(self, x, cache=None):
        B, S, d = x.shape
        q, k, v = self._split(self.W_q(x)), self._split(self.W_k(x)), self._split(self.W_v(x))
        if cache is not None:
            k = torch.cat([cache[0], k], dim=2)
            v = torch.cat([cache[1], v], dim=2)
        past = k.shape[2] - S
        s = (q @ k.transpose(-2, -1) / math.sqrt(self.dk)).tril(past)
        s = s.masked_fill(s == 0, float("-inf"))
        out = (torch.softmax(s, dim=-1) @ v).transpose(1, 2).reshape(B, S, d)
        return self.W_o(out), (k, v)

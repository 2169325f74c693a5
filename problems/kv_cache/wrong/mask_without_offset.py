# expect: wrong_answer
# mistake: causal mask aligned top-left (no offset for the cached positions)
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

    def split(self, x):
        return x.view(x.shape[0], x.shape[1], self.h, self.dk).transpose(1, 2)

    def forward(self, x, cache=None):
        B, S, D = x.shape
        q, k, v = self.split(self.W_q(x)), self.split(self.W_k(x)), self.split(self.W_v(x))
        if cache is not None:
            k, v = torch.cat([cache[0], k], 2), torch.cat([cache[1], v], 2)
        s = q @ k.transpose(-2, -1) / math.sqrt(self.dk)
        mask = torch.ones(S, k.shape[2], dtype=torch.bool, device=x.device).tril()
        w = torch.softmax(s.masked_fill(~mask, float("-inf")), -1)
        return self.W_o((w @ v).transpose(1, 2).reshape(B, S, D)), (k, v)

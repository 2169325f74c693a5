# expect: accepted
# alternative: the mask built in two blocks: all cached positions visible, then a square tril over the new tokens
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
        return x.reshape(x.shape[0], x.shape[1], self.h, self.dk).transpose(1, 2)

    def forward(self, x, cache=None):
        B, S, D = x.shape
        q, k, v = self.split(self.W_q(x)), self.split(self.W_k(x)), self.split(self.W_v(x))
        past = 0 if cache is None else cache[0].shape[2]
        if cache is not None:
            k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)
        seen = torch.ones(S, past, dtype=torch.bool, device=x.device)
        new = torch.ones(S, S, dtype=torch.bool, device=x.device).tril()
        mask = torch.cat([seen, new], dim=1)  # (S, past + S)
        s = (q @ k.transpose(-2, -1) / math.sqrt(self.dk)).masked_fill(~mask, float("-inf"))
        out = (torch.softmax(s, dim=-1) @ v).transpose(1, 2).reshape(B, S, D)
        return self.W_o(out), (k, v)

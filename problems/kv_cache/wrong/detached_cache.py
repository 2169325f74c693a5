# expect: wrong_answer
# mistake: detaches the returned cache (to keep the graph small): gradients through cached keys/values never reach W_k, W_v or earlier tokens
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
        if cache is not None:
            k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)
        past = k.shape[2] - S
        mask = torch.ones(S, k.shape[2], dtype=torch.bool, device=x.device).tril(diagonal=past)
        s = (q @ k.transpose(-2, -1) / math.sqrt(self.dk)).masked_fill(~mask, float("-inf"))
        out = (torch.softmax(s, dim=-1) @ v).transpose(1, 2).reshape(B, S, D)
        return self.W_o(out), (k.detach(), v.detach())

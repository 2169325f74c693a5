# expect: accepted
# alternative: one new token at a time over its visible prefix
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
        past = k.shape[2] - S
        outs = []
        for t in range(S):
            end = past + t + 1
            s = q[:, :, t : t + 1] @ k[:, :, :end].transpose(-2, -1) / math.sqrt(self.dk)
            outs.append(torch.softmax(s, -1) @ v[:, :, :end])
        out = torch.cat(outs, dim=2).transpose(1, 2).reshape(B, S, D)
        return self.W_o(out), (k, v)

# expect: accepted
# alternative: no mask at all for single-token decoding (the newest token sees everything), a tril over the whole sequence sliced to the last S_new rows otherwise
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
            k, v = torch.cat((cache[0], k), dim=-2), torch.cat((cache[1], v), dim=-2)
        T = k.shape[-2]
        scores = torch.einsum("bhqd,bhkd->bhqk", q, k) * self.dk ** -0.5
        if S > 1:
            full = torch.tril(torch.ones(T, T, dtype=torch.bool, device=x.device))
            scores = scores.masked_fill(~full[T - S :], float("-inf"))
        out = torch.einsum("bhqk,bhkd->bhqd", scores.softmax(-1), v)
        return self.W_o(out.transpose(1, 2).reshape(B, S, D)), (k, v)

# expect: runtime_error
# mistake: keeps the key/value history on self and ignores the cache it is handed (fine for one sequence, wrong for any other)
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
        self.k_hist = self.v_hist = None

    def split(self, x):
        B, S, _ = x.shape
        return x.view(B, S, self.h, self.dk).transpose(1, 2)

    def forward(self, x, cache=None):
        B, S, D = x.shape
        q, k, v = self.split(self.W_q(x)), self.split(self.W_k(x)), self.split(self.W_v(x))
        if cache is None:  # a new sequence starts
            self.k_hist, self.v_hist = k, v
        else:  # continue "the" sequence: our own copy instead of the cache we were given
            self.k_hist = torch.cat([self.k_hist, k], dim=2)
            self.v_hist = torch.cat([self.v_hist, v], dim=2)
        k, v = self.k_hist, self.v_hist
        T = k.shape[2]
        mask = torch.ones(S, T, dtype=torch.bool, device=x.device).tril(T - S)
        s = (q @ k.transpose(-2, -1) / math.sqrt(self.dk)).masked_fill(~mask, float("-inf"))
        out = (torch.softmax(s, -1) @ v).transpose(1, 2).reshape(B, S, D)
        return self.W_o(out), (k, v)

# expect: accepted
# alternative: head counts in a helper with __index__, passed to view() (torch reads them inside its ops)
import math
import torch
import torch.nn as nn


class Dim:
    def __init__(self, n):
        self.n = n

    def __index__(self):
        return self.n


class KVCacheAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.h, self.dk = Dim(num_heads), Dim(d_model // num_heads)
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)

    def forward(self, x, cache=None):
        B, S, D = x.shape
        sp = lambda t: t.view(B, S, self.h, self.dk).transpose(1, 2)
        q, k, v = sp(self.W_q(x)), sp(self.W_k(x)), sp(self.W_v(x))
        if cache is not None:
            k, v = torch.cat((cache[0], k), -2), torch.cat((cache[1], v), -2)
        T = k.shape[-2]
        s = q @ k.transpose(-1, -2) / math.sqrt(self.dk.n)
        qi = torch.arange(T - S, T, device=x.device)[:, None]
        kj = torch.arange(T, device=x.device)[None, :]
        s = s.masked_fill(kj > qi, float("-inf"))
        o = (s.softmax(-1) @ v).transpose(1, 2).reshape(B, S, D)
        return self.W_o(o), (k, v)

# expect: wrong_answer
# mistake: masks only the prefill; a chunk on a non-empty cache sees its own future
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
        s_mask = None
        if cache is None:
            s_mask = torch.ones(S, S, dtype=torch.bool, device=x.device).tril()
        else:
            k, v = torch.cat([cache[0], k], 2), torch.cat([cache[1], v], 2)
        s = q @ k.transpose(-2, -1) / math.sqrt(self.dk)
        if s_mask is not None:
            s = s.masked_fill(~s_mask, float("-inf"))
        w = torch.softmax(s, -1)
        return self.W_o((w @ v).transpose(1, 2).reshape(B, S, D)), (k, v)

# expect: wrong_output
# mistake: stores the head count on the class (KVCacheAttention.num_heads = ...), so every layer of a model uses the head count of the layer built last
import math

import torch
from torch import nn


class KVCacheAttention(nn.Module):
    num_heads = 1

    def __init__(self, d_model, num_heads):
        super().__init__()
        KVCacheAttention.num_heads = num_heads  # meant self.num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)

    def forward(self, x, cache=None):
        B, S, D = x.shape
        H = KVCacheAttention.num_heads
        dk = D // H
        split = lambda t: t.reshape(B, S, H, dk).transpose(1, 2)
        q, k, v = split(self.W_q(x)), split(self.W_k(x)), split(self.W_v(x))
        if cache is not None:
            k, v = torch.cat((cache[0], k), dim=-2), torch.cat((cache[1], v), dim=-2)
        total = k.shape[-2]
        qpos = torch.arange(total - S, total, device=x.device)[:, None]
        kpos = torch.arange(total, device=x.device)[None, :]
        s = (q @ k.transpose(-2, -1)) / math.sqrt(dk)
        w = torch.softmax(s.masked_fill(kpos > qpos, float("-inf")), dim=-1)
        out = (w @ v).transpose(1, 2).reshape(B, S, D)
        return self.W_o(out), (k, v)

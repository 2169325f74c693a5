# expect: wrong_answer
# Expands the K/V projection weights to all heads once per layer shape and keeps them in a
# module-level dict "for speed" (keyed by shape, dtype and device): another layer of the same shape
# (other weights) gets stale ones.
import math

import torch
from torch import nn

_expanded = {}


class GroupQueryAttention(nn.Module):
    def __init__(self, d_model, num_heads, num_kv_heads):
        super().__init__()
        self.num_heads, self.num_kv_heads, self.d_k = num_heads, num_kv_heads, d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, num_kv_heads * self.d_k)
        self.W_v = nn.Linear(d_model, num_kv_heads * self.d_k)
        self.W_o = nn.Linear(d_model, d_model)

    def _full_kv(self):
        key = (self.W_q.in_features, self.num_heads, self.num_kv_heads, self.W_k.weight.dtype, self.W_k.weight.device)
        if key not in _expanded:
            n_rep = self.num_heads // self.num_kv_heads

            def grow(lin):  # (H_kv * d_k, d) -> (H * d_k, d): each KV head's rows repeated n_rep times
                w = lin.weight.view(self.num_kv_heads, 1, self.d_k, -1).expand(-1, n_rep, -1, -1)
                b = lin.bias.view(self.num_kv_heads, 1, self.d_k).expand(-1, n_rep, -1)
                return w.reshape(self.num_heads * self.d_k, -1), b.reshape(-1)

            _expanded[key] = grow(self.W_k), grow(self.W_v)
        return _expanded[key]

    def forward(self, x):
        B, S, d_model = x.shape
        (wk, bk), (wv, bv) = self._full_kv()
        q = self.W_q(x).view(B, S, self.num_heads, self.d_k).transpose(1, 2)
        k = (x @ wk.T + bk).view(B, S, self.num_heads, self.d_k).transpose(1, 2)
        v = (x @ wv.T + bv).view(B, S, self.num_heads, self.d_k).transpose(1, 2)
        w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(self.d_k), dim=-1)
        return self.W_o((w @ v).transpose(1, 2).reshape(B, S, d_model))

# expect: wrong_answer
# mistake: activation checkpointing in training with torch.utils.checkpoint(use_reentrant=True), which builds a graph
#   only when an input needs a gradient: on inputs from a frozen layer the weights get no gradient
import math

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint


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
        if self.training:  # activation checkpointing while training (flat tensors in and out, as reentrant wants)
            args = (x,) if cache is None else (x, *cache)
            out, k, v = checkpoint(self._flat, *args, use_reentrant=True)
            return out, (k, v)
        return self._forward(x, cache)

    def _flat(self, x, *cache):
        out, (k, v) = self._forward(x, tuple(cache) or None)
        return out, k, v

    def _forward(self, x, cache=None):
        B, S, D = x.shape
        q, k, v = self.split(self.W_q(x)), self.split(self.W_k(x)), self.split(self.W_v(x))
        if cache is not None:
            k, v = torch.cat((cache[0], k), dim=-2), torch.cat((cache[1], v), dim=-2)
        past = k.shape[2] - S
        allowed = torch.arange(k.shape[2], device=x.device)[None, :] <= torch.arange(past, past + S, device=x.device)[:, None]
        s = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(self.dk)
        w = torch.where(allowed, s, float("-inf")).softmax(-1)
        out = torch.einsum("bhqk,bhkd->bqhd", w, v).reshape(B, S, D)
        return self.W_o(out), (k, v)

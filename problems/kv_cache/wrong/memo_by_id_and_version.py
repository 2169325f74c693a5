# expect: wrong_answer
# problem: kv_cache
# mistake: memoises the last result under (id, ._version, shape) of x and of the cache tensors plus the weights'
#   versions, "to skip recomputing a repeated decoding step": in a decoding loop under torch.no_grad() that builds
#   each step's x afresh, a new x at a freed one's address has version 0 again and gets the old step's result.
#   kv_cache has no case whose inputs are freed between calls.
import math

import torch
from torch import nn


def _key(t):
    return (id(t), t._version, tuple(t.shape))


class KVCacheAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.h, self.dk = num_heads, d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)
        self._memo = None

    def forward(self, x, cache=None):
        key = (_key(x), None if cache is None else (_key(cache[0]), _key(cache[1])),
               tuple(p._version for p in self.parameters()), torch.is_grad_enabled())
        if self._memo is not None and self._memo[0] == key:
            return self._memo[1]
        B, S, D = x.shape
        q = self.W_q(x).view(B, S, self.h, self.dk).transpose(1, 2)
        k = self.W_k(x).view(B, S, self.h, self.dk).transpose(1, 2)
        v = self.W_v(x).view(B, S, self.h, self.dk).transpose(1, 2)
        past = 0
        if cache is not None:
            past = cache[0].shape[2]
            k = torch.cat([cache[0], k], dim=2)
            v = torch.cat([cache[1], v], dim=2)
        T = past + S
        s = q @ k.transpose(-2, -1) / math.sqrt(self.dk)
        i = torch.arange(S, device=x.device).unsqueeze(1) + past
        j = torch.arange(T, device=x.device).unsqueeze(0)
        s = s.masked_fill(j > i, float("-inf"))
        out = self.W_o((torch.softmax(s, dim=-1) @ v).transpose(1, 2).reshape(B, S, D))
        res = (out, (k, v))
        self._memo = (key, res)
        return res

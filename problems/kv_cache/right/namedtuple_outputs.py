# expect: accepted
# alternative: returns namedtuples (out, cache) and (k, v); reads a cache it is handed by index, as the contract's
# (k, v) tuple (a caller that cuts the cache, for speculative decoding, hands back a plain tuple)
import collections
import math

import torch
from torch import nn

KV = collections.namedtuple("KV", "k v")
Out = collections.namedtuple("Out", "out cache")


class KVCacheAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.h, self.dk = num_heads, d_model // num_heads
        self.W_q, self.W_k, self.W_v, self.W_o = (nn.Linear(d_model, d_model) for _ in range(4))

    def forward(self, x, cache=None):
        B, S, D = x.shape
        split = lambda t: t.view(B, S, self.h, self.dk).transpose(1, 2)  # noqa: E731 (B, H, S, dk)
        q, k, v = split(self.W_q(x)), split(self.W_k(x)), split(self.W_v(x))
        if cache is not None:
            k, v = torch.cat([cache[0], k], 2), torch.cat([cache[1], v], 2)  # a caller may hand back a plain tuple
        P = k.shape[2] - S  # cached positions
        s = q @ k.transpose(-2, -1) / math.sqrt(self.dk)
        m = torch.ones(S, k.shape[2], dtype=torch.bool, device=x.device).tril(P)
        w = torch.softmax(s.masked_fill(~m, float("-inf")), -1)
        return Out(self.W_o((w @ v).transpose(1, 2).reshape(B, S, D)), KV(k, v))

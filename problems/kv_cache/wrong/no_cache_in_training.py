# expect: wrong_output
# mistake: the cache is built only for inference, as some libraries do: in training mode (module.train(), the
#   default after construction) forward returns (out, None) and ignores the cache it is handed
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
        B, S, _ = x.shape
        return x.reshape(B, S, self.h, self.dk).transpose(1, 2)

    def forward(self, x, cache=None):
        B, S, D = x.shape
        use_cache = not self.training  # training never decodes step by step
        q, k, v = self.split(self.W_q(x)), self.split(self.W_k(x)), self.split(self.W_v(x))
        if use_cache and cache is not None:
            k = torch.cat([cache[0], k], dim=2)
            v = torch.cat([cache[1], v], dim=2)
        T = k.shape[2]
        s = q @ k.transpose(-2, -1) / math.sqrt(self.dk)
        keep = torch.ones(S, T, dtype=torch.bool, device=x.device).tril(T - S)
        s = s.masked_fill(~keep, float("-inf"))
        out = (s.softmax(-1) @ v).transpose(1, 2).reshape(B, S, D)
        return self.W_o(out), ((k, v) if use_cache else None)

# expect: wrong_answer
# mistake: a prompt seen before (the same tensor object, checked alive through a weak reference) returns the output
# and cache computed the first time: stale when the caller writes new tokens into the same buffer
import math
import weakref

import torch
from torch import nn


class KVCacheAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.num_heads, self.d_k = num_heads, d_model // num_heads
        self.W_q, self.W_k = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
        self.W_v, self.W_o = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
        self._seen = {}

    def split_heads(self, x):
        B, S, _ = x.shape
        return x.view(B, S, self.num_heads, self.d_k).transpose(1, 2)  # (B, H, S, d_k)

    def forward(self, x, cache=None):
        if cache is None and not torch.is_grad_enabled():
            hit = self._seen.get(id(x))
            if hit is not None and hit[0]() is x:
                return hit[1]
        B, S_new, d_model = x.shape
        q, k, v = self.split_heads(self.W_q(x)), self.split_heads(self.W_k(x)), self.split_heads(self.W_v(x))
        if cache is not None:
            k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)  # (B, H, S_total, d_k)
        S_past = k.size(2) - S_new
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)
        causal = torch.ones(S_new, k.size(2), dtype=torch.bool, device=x.device).tril(diagonal=S_past)
        out = torch.softmax(scores.masked_fill(~causal, float("-inf")), -1) @ v
        result = self.W_o(out.transpose(1, 2).reshape(B, S_new, d_model)), (k, v)
        if cache is None and not torch.is_grad_enabled():
            self._seen[id(x)] = (weakref.ref(x), result)
        return result

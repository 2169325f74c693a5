# expect: wrong_output
# mistake: keeps a pre-transposed K^T (and V) on self keyed by the data_ptr() of the cache it returned and reuses it when handed a cache at that address; stale when the caller truncates the cache (speculative decode keeps the data_ptr of k[:, :, :L])

import math

import weakref

import torch
from torch import nn


class KVCacheAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        if d_model % num_heads:
            raise ValueError("d_model must be divisible by num_heads")
        self.num_heads = num_heads
        self.d_k = d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)

    def split_heads(self, x):
        B, S, _ = x.shape
        return x.view(B, S, self.num_heads, self.d_k).transpose(1, 2)  # (B, H, S, d_k)

    def forward(self, x, cache=None):
        B, S_new, d_model = x.shape
        q = self.split_heads(self.W_q(x))  # (B, H, S_new, d_k)
        k = self.split_heads(self.W_k(x))  # (B, H, S_new, d_k)
        v = self.split_heads(self.W_v(x))
        memo = self.__dict__.setdefault("_memo", {})
        kT_past = None
        if cache is not None:
            hit = memo.get(cache[0].data_ptr())
            if hit is not None and hit[0]() is not None:  # a cache I returned: reuse my pre-transposed copy
                ck, kT_past, cv = hit[0](), hit[1], hit[2]
            else:
                ck, cv = cache
            k_new = k
            k = torch.cat([ck, k], dim=2)  # (B, H, S_total, d_k)
            v = torch.cat([cv, v], dim=2)
        S_total = k.size(2)
        S_past = S_total - S_new
        if kT_past is not None:
            kT = torch.cat([kT_past, k_new.transpose(-2, -1)], dim=-1)
        else:
            kT = k.transpose(-2, -1)
        scores = q @ kT / math.sqrt(self.d_k)  # (B, H, S_new, S_total)
        # new token t is at absolute position S_past + t and sees keys 0 .. S_past + t
        causal = torch.ones(S_new, S_total, dtype=torch.bool, device=x.device).tril(diagonal=S_past)
        scores = scores.masked_fill(~causal, float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        out = weights @ v  # (B, H, S_new, d_k)
        out = out.transpose(1, 2).reshape(B, S_new, d_model)
        memo[k.data_ptr()] = (weakref.ref(k), kT.contiguous(), v)  # keyed by storage: K^T ready for the next step
        return self.W_o(out), (k, v)

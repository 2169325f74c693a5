# expect: accepted
# alternative: the softmax written as exp(s - logsumexp(s)), in float32, cast back
"""Causal multi-head attention with a KV cache, its softmax through logsumexp."""

import math

import torch
from torch import nn


def _up_lse(s):
    s32 = s.to(torch.promote_types(s.dtype, torch.float32))
    return torch.exp(s32 - torch.logsumexp(s32, dim=-1, keepdim=True)).to(s.dtype)


def _core(q, k, v, d, neg, drop=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(d)
    if neg is not None:
        scores = scores.masked_fill(neg, float("-inf"))
    w = _up_lse(scores)
    if drop is not None:
        w = drop(w)
    return w @ v


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
        if cache is not None:
            k = torch.cat([cache[0], k], dim=2)  # (B, H, S_total, d_k)
            v = torch.cat([cache[1], v], dim=2)
        S_total = k.size(2)
        S_past = S_total - S_new
        # new token t is at absolute position S_past + t and sees keys 0 .. S_past + t
        causal = torch.ones(S_new, S_total, dtype=torch.bool, device=x.device).tril(diagonal=S_past)
        out = _core(q, k, v, self.d_k, ~causal)
        out = out.transpose(1, 2).reshape(B, S_new, d_model)
        return self.W_o(out), (k, v)

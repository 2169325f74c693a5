# expect: accepted
# alternative: the softmax written as exp(s - logsumexp(s)), in float32, cast back
"""Multi-head attention, its softmax through logsumexp."""

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


class MultiHeadAttention(nn.Module):
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

    def forward(self, Q, K, V):
        B, Sq, d_model = Q.shape
        q = self.split_heads(self.W_q(Q))  # (B, H, Sq, d_k)
        k = self.split_heads(self.W_k(K))  # (B, H, Sk, d_k)
        v = self.split_heads(self.W_v(V))  # (B, H, Sk, d_k)
        out = _core(q, k, v, self.d_k, None)
        out = out.transpose(1, 2).reshape(B, Sq, d_model)  # (B, Sq, d_model)
        return self.W_o(out)

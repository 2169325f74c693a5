# expect: wrong_answer
# mistake: activation checkpointing in training with torch.utils.checkpoint(use_reentrant=True), which builds a graph
#   only when an input needs a gradient: on inputs from a frozen layer the weights get no gradient
import math

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint


class GroupQueryAttention(nn.Module):
    def __init__(self, d_model, num_heads, num_kv_heads):
        super().__init__()
        if d_model % num_heads or num_heads % num_kv_heads:
            raise ValueError("need d_model % num_heads == 0 and num_heads % num_kv_heads == 0")
        self.num_heads = num_heads
        self.num_kv_heads = num_kv_heads
        self.d_k = d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, num_kv_heads * self.d_k)
        self.W_v = nn.Linear(d_model, num_kv_heads * self.d_k)
        self.W_o = nn.Linear(d_model, d_model)

    def forward(self, x):
        if self.training:  # activation checkpointing while training
            return checkpoint(self._forward, x, use_reentrant=True)
        return self._forward(x)

    def _forward(self, x):
        B, S, d_model = x.shape
        n_rep = self.num_heads // self.num_kv_heads
        q = self.W_q(x).view(B, S, self.num_heads, self.d_k).transpose(1, 2)  # (B, H, S, d_k)
        k = self.W_k(x).view(B, S, self.num_kv_heads, self.d_k).transpose(1, 2)  # (B, H_kv, S, d_k)
        v = self.W_v(x).view(B, S, self.num_kv_heads, self.d_k).transpose(1, 2)  # (B, H_kv, S, d_k)
        k = k.repeat_interleave(n_rep, dim=1)  # (B, H, S, d_k): head h reads KV head h // n_rep
        v = v.repeat_interleave(n_rep, dim=1)  # (B, H, S, d_k)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)  # (B, H, S, S)
        weights = torch.softmax(scores, dim=-1)
        out = weights @ v  # (B, H, S, d_k)
        out = out.transpose(1, 2).reshape(B, S, d_model)  # (B, S, d_model)
        return self.W_o(out)

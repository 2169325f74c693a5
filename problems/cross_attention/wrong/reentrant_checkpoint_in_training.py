# expect: wrong_answer
# mistake: activation checkpointing in training with torch.utils.checkpoint(use_reentrant=True), which builds a graph
#   only when an input needs a gradient: on inputs from a frozen layer the weights get no gradient
import math

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint


class MultiHeadCrossAttention(nn.Module):
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

    def forward(self, x_q, x_kv):
        if self.training:  # activation checkpointing while training
            return checkpoint(self._forward, x_q, x_kv, use_reentrant=True)
        return self._forward(x_q, x_kv)

    def _forward(self, x_q, x_kv):
        B, Sq, d_model = x_q.shape
        q = self.split_heads(self.W_q(x_q))  # (B, H, Sq, d_k)
        k = self.split_heads(self.W_k(x_kv))  # (B, H, Skv, d_k)
        v = self.split_heads(self.W_v(x_kv))  # (B, H, Skv, d_k)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)  # (B, H, Sq, Skv)
        weights = torch.softmax(scores, dim=-1)
        out = weights @ v  # (B, H, Sq, d_k)
        out = out.transpose(1, 2).reshape(B, Sq, d_model)  # (B, Sq, d_model)
        return self.W_o(out)

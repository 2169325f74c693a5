# expect: wrong_answer
# mistake: a "fused QKV" speed-up that concatenates W_q, W_k, W_v (and their biases) once, on the first forward, and
# keeps them on self: after the caller changes the weights (an optimizer step) the layer computes with the old ones
import math

import torch
from torch import nn


class GroupQueryAttention(nn.Module):
    def __init__(self, d_model, num_heads, num_kv_heads):
        super().__init__()
        self.num_heads, self.num_kv_heads = num_heads, num_kv_heads
        self.d_k = d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, num_kv_heads * self.d_k)
        self.W_v = nn.Linear(d_model, num_kv_heads * self.d_k)
        self.W_o = nn.Linear(d_model, d_model)
        self.fused = None

    def forward(self, x):
        B, S, d_model = x.shape
        if self.fused is None:  # made once: faster than three projections
            self.fused = (torch.cat([self.W_q.weight, self.W_k.weight, self.W_v.weight]),
                          torch.cat([self.W_q.bias, self.W_k.bias, self.W_v.bias]))
        w, b = self.fused
        kv = self.num_kv_heads * self.d_k
        q, k, v = torch.nn.functional.linear(x, w, b).split([d_model, kv, kv], dim=-1)
        n_rep = self.num_heads // self.num_kv_heads
        q = q.view(B, S, self.num_heads, self.d_k).transpose(1, 2)
        k = k.view(B, S, self.num_kv_heads, self.d_k).transpose(1, 2).repeat_interleave(n_rep, dim=1)
        v = v.view(B, S, self.num_kv_heads, self.d_k).transpose(1, 2).repeat_interleave(n_rep, dim=1)
        out = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(self.d_k), dim=-1) @ v
        return self.W_o(out.transpose(1, 2).reshape(B, S, d_model))

# expect: wrong_answer
# mistake: fuses W_q/W_k/W_v into one matmul each call but concatenates their biases only once (first call), so biases changed by an optimizer step are never seen
import math

import torch
from torch import nn


class GroupQueryAttention(nn.Module):
    def __init__(self, d_model, num_heads, num_kv_heads):
        super().__init__()
        self.h, self.hkv, self.dk = num_heads, num_kv_heads, d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, num_kv_heads * self.dk)
        self.W_v = nn.Linear(d_model, num_kv_heads * self.dk)
        self.W_o = nn.Linear(d_model, d_model)
        self._fused_bias = None

    def forward(self, x):
        B, S, D = x.shape
        if self._fused_bias is None:  # biases "never change": concatenate once
            self._fused_bias = torch.cat([self.W_q.bias, self.W_k.bias, self.W_v.bias])
        w = torch.cat([self.W_q.weight, self.W_k.weight, self.W_v.weight])
        qkv = x @ w.t() + self._fused_bias
        q, k, v = qkv.split([D, self.hkv * self.dk, self.hkv * self.dk], dim=-1)
        q = q.reshape(B, S, self.h, self.dk).transpose(1, 2)
        k = k.reshape(B, S, self.hkv, self.dk).transpose(1, 2)
        v = v.reshape(B, S, self.hkv, self.dk).transpose(1, 2)
        n = self.h // self.hkv
        k = k[:, :, None].expand(B, self.hkv, n, S, self.dk).reshape(B, self.h, S, self.dk)
        v = v[:, :, None].expand(B, self.hkv, n, S, self.dk).reshape(B, self.h, S, self.dk)
        a = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(self.dk), dim=-1)
        return self.W_o((a @ v).transpose(1, 2).reshape(B, S, D))

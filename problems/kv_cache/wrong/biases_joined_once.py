# expect: wrong_answer
# mistake: fuses W_q/W_k/W_v into one matmul each call but concatenates their biases only once (first call), so biases changed by an optimizer step are never seen
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
        self._fused_bias = None

    def forward(self, x, cache=None):
        B, S, D = x.shape
        if self._fused_bias is None:
            self._fused_bias = torch.cat([self.W_q.bias, self.W_k.bias, self.W_v.bias])
        w = torch.cat([self.W_q.weight, self.W_k.weight, self.W_v.weight])
        qkv = (x @ w.t() + self._fused_bias).reshape(B, S, 3, self.h, self.dk)
        q, k, v = (qkv[:, :, i].transpose(1, 2) for i in range(3))
        if cache is not None:
            k, v = torch.cat((cache[0], k), dim=-2), torch.cat((cache[1], v), dim=-2)
        T = k.shape[-2]
        allowed = torch.arange(T, device=x.device)[None, :] <= torch.arange(T - S, T, device=x.device)[:, None]
        s = (q @ k.transpose(-2, -1) / math.sqrt(self.dk)).masked_fill(~allowed, float("-inf"))
        out = (torch.softmax(s, dim=-1) @ v).transpose(1, 2).reshape(B, S, D)
        return self.W_o(out), (k, v)

# expect: wrong_answer
# mistake: fuses W_k/W_v into one matmul each call but concatenates their biases only once (first call), so biases changed by an optimizer step are never seen
import math

import torch
from torch import nn


class MultiHeadCrossAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.h, self.dk = num_heads, d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)
        self._kv_bias = None

    def forward(self, x_q, x_kv):
        B, Sq, D = x_q.shape
        if self._kv_bias is None:
            self._kv_bias = torch.cat([self.W_k.bias, self.W_v.bias])
        kv = x_kv @ torch.cat([self.W_k.weight, self.W_v.weight]).t() + self._kv_bias
        k, v = kv.split(D, dim=-1)
        q = self.W_q(x_q).reshape(B, Sq, self.h, self.dk).transpose(1, 2)
        k = k.reshape(B, -1, self.h, self.dk).transpose(1, 2)
        v = v.reshape(B, -1, self.h, self.dk).transpose(1, 2)
        a = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(self.dk), dim=-1)
        return self.W_o((a @ v).transpose(1, 2).reshape(B, Sq, D))

# expect: wrong_answer
# mistake: fuses W_k and W_v into one buffer in __init__ for speed: the buffer is a copy of the initial weights, so
# the weights the layer is given later (loaded by name, or trained) never reach the keys and values
import math

import torch
from torch import nn


class GroupQueryAttention(nn.Module):
    def __init__(self, d_model, num_heads, num_kv_heads):
        super().__init__()
        self.h, self.kv, self.d_k = num_heads, num_kv_heads, d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, num_kv_heads * self.d_k)
        self.W_v = nn.Linear(d_model, num_kv_heads * self.d_k)
        self.W_o = nn.Linear(d_model, d_model)
        self.register_buffer("w_kv", torch.cat([self.W_k.weight, self.W_v.weight]).detach().clone(), persistent=False)
        self.register_buffer("b_kv", torch.cat([self.W_k.bias, self.W_v.bias]).detach().clone(), persistent=False)

    def forward(self, x):
        B, S, _ = x.shape
        q = self.W_q(x).reshape(B, S, self.h, self.d_k).transpose(1, 2)
        k, v = nn.functional.linear(x, self.w_kv, self.b_kv).chunk(2, dim=-1)
        k = k.reshape(B, S, self.kv, self.d_k).transpose(1, 2).repeat_interleave(self.h // self.kv, dim=1)
        v = v.reshape(B, S, self.kv, self.d_k).transpose(1, 2).repeat_interleave(self.h // self.kv, dim=1)
        weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(self.d_k), dim=-1)
        return self.W_o((weights @ v).transpose(1, 2).reshape(B, S, -1))

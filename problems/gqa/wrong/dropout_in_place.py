# expect: runtime_error
# mistake: attention dropout with inplace=True on the softmax output: in training mode (the default after
#   construction) backward fails ("modified by an inplace operation"); eval mode hides it
import math
import torch
from torch import nn


class GroupQueryAttention(nn.Module):
    def __init__(self, d_model, num_heads, num_kv_heads, dropout=0.1):
        super().__init__()
        self.h, self.kvh, self.dk = num_heads, num_kv_heads, d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, num_kv_heads * self.dk)
        self.W_v = nn.Linear(d_model, num_kv_heads * self.dk)
        self.W_o = nn.Linear(d_model, d_model)
        self.attn_drop = nn.Dropout(dropout, inplace=True)  # save memory

    def forward(self, x):
        B, S, D = x.shape
        q = self.W_q(x).view(B, S, self.h, self.dk).transpose(1, 2)
        k = self.W_k(x).view(B, S, self.kvh, self.dk).transpose(1, 2)
        v = self.W_v(x).view(B, S, self.kvh, self.dk).transpose(1, 2)
        n = self.h // self.kvh
        k = k.repeat_interleave(n, dim=1)
        v = v.repeat_interleave(n, dim=1)
        w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(self.dk), dim=-1)
        w = self.attn_drop(w)
        return self.W_o((w @ v).transpose(1, 2).reshape(B, S, D))

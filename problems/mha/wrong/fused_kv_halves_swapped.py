# expect: wrong_answer
# mistake: when K is V (layer(q, mem, mem), nn.MultiheadAttention's `key is value` branch), one fused projection of the
# memory with its halves swapped (values used as keys); the general path is right
import math
import torch
import torch.nn.functional as F
from torch import nn


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.h, self.dk = num_heads, d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)

    def forward(self, Q, K, V):
        B, Sq, d = Q.shape
        q = self.W_q(Q)
        if K is V and Q is not K:
            w = torch.cat([self.W_k.weight, self.W_v.weight])
            b = torch.cat([self.W_k.bias, self.W_v.bias])
            v, k = F.linear(K, w, b).split(d, dim=-1)   # BUG: halves swapped
        else:
            k, v = self.W_k(K), self.W_v(V)
        q = q.reshape(B, -1, self.h, self.dk).transpose(1, 2)
        k = k.reshape(B, -1, self.h, self.dk).transpose(1, 2)
        v = v.reshape(B, -1, self.h, self.dk).transpose(1, 2)
        a = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(self.dk), dim=-1) @ v
        return self.W_o(a.transpose(1, 2).reshape(B, Sq, d))

# expect: wrong_answer
# mistake: a self-attention fast path (one fused projection when Q is K is V, as nn.MultiheadAttention has) that
# splits the fused result as (q, v, k); the general path is right
import math

import torch
from torch import nn


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.h, self.dk = num_heads, d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)

    def _attend(self, q, k, v, B, Sq, D):
        q = q.view(B, Sq, self.h, self.dk).transpose(1, 2)
        k = k.view(B, -1, self.h, self.dk).transpose(1, 2)
        v = v.view(B, -1, self.h, self.dk).transpose(1, 2)
        att = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(self.dk), dim=-1)
        return self.W_o((att @ v).transpose(1, 2).reshape(B, Sq, D))

    def forward(self, Q, K, V):
        B, Sq, D = Q.shape
        if Q is K and K is V:  # self-attention: one fused projection
            w = torch.cat([self.W_q.weight, self.W_k.weight, self.W_v.weight])
            b = torch.cat([self.W_q.bias, self.W_k.bias, self.W_v.bias])
            q, v, k = (Q @ w.T + b).chunk(3, dim=-1)  # wrong order: should be q, k, v
            return self._attend(q, k, v, B, Sq, D)
        return self._attend(self.W_q(Q), self.W_k(K), self.W_v(V), B, Sq, D)

# expect: wrong_answer
# mistake: a loop over heads that slices features [h : h + d_k] instead of [h * d_k : (h + 1) * d_k]
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

    def forward(self, Q, K, V):
        q, k, v = self.W_q(Q), self.W_k(K), self.W_v(V)
        heads = []
        for h in range(self.h):
            sl = slice(h, h + self.dk)
            w = torch.softmax(q[..., sl] @ k[..., sl].transpose(-2, -1) / math.sqrt(self.dk), dim=-1)
            heads.append(w @ v[..., sl])
        return self.W_o(torch.cat(heads, dim=-1))

# expect: accepted
# alternative: one head at a time on feature slices, then concatenate
import math

import torch
from torch import nn


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)

    def forward(self, Q, K, V):
        q, k, v = self.W_q(Q), self.W_k(K), self.W_v(V)
        dk = q.shape[-1] // self.num_heads
        heads = []
        for h in range(self.num_heads):
            sl = slice(h * dk, (h + 1) * dk)
            w = torch.softmax(q[..., sl] @ k[..., sl].transpose(1, 2) / math.sqrt(dk), dim=-1)
            heads.append(w @ v[..., sl])
        return self.W_o(torch.cat(heads, dim=-1))

# expect: accepted
# alternative: heads split by torch.vmap twice (over batch, then over heads): one_head sees (S, d_k) tensors;
# forward(self, query, key, value): passed by position, so any names do
import math

import torch
from torch import nn


def one_head(q, k, v):
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1) @ v


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.h = num_heads
        self.W_q, self.W_k = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
        self.W_v, self.W_o = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)

    def forward(self, query, key, value):
        B, Sq, d = query.shape
        q, k, v = (t.reshape(B, t.shape[1], self.h, d // self.h)
                   for t in (self.W_q(query), self.W_k(key), self.W_v(value)))  # (B, S, h, d_k)
        out = torch.vmap(torch.vmap(one_head, in_dims=1, out_dims=1))(q, k, v)  # batch, then heads (dim 1 of each)
        return self.W_o(out.reshape(B, Sq, d))

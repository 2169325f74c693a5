# expect: accepted
# alternative: heads split by torch.vmap twice (over batch, then over heads): one_head sees (S, d_k) tensors
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

    def forward(self, Q, K, V):
        B, Sq, d = Q.shape
        split = lambda x: x.reshape(B, x.shape[1], self.h, d // self.h)
        out = torch.vmap(torch.vmap(one_head, in_dims=1, out_dims=1))(split(self.W_q(Q)), split(self.W_k(K)), split(self.W_v(V)))
        return self.W_o(out.reshape(B, Sq, d))

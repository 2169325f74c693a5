# expect: accepted
# alternative: no repetition at all: a loop over KV heads, each attending with its group of query heads stacked
# along the query axis (one matmul per group), then the groups put back in head order
import math

import torch
from torch import nn


class GroupQueryAttention(nn.Module):
    def __init__(self, d_model, num_heads, num_kv_heads):
        super().__init__()
        self.h, self.g, self.d_k = num_heads, num_kv_heads, d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, num_kv_heads * self.d_k)
        self.W_v = nn.Linear(d_model, num_kv_heads * self.d_k)
        self.W_o = nn.Linear(d_model, d_model)

    def forward(self, x):
        B, S, _ = x.shape
        rep = self.h // self.g
        q = self.W_q(x).reshape(B, S, self.h, self.d_k)
        k = self.W_k(x).reshape(B, S, self.g, self.d_k)
        v = self.W_v(x).reshape(B, S, self.g, self.d_k)
        groups = []
        for j in range(self.g):
            qj = q[:, :, j * rep:(j + 1) * rep].permute(0, 2, 1, 3).reshape(B, rep * S, self.d_k)  # rep heads, stacked
            w = torch.softmax(qj @ k[:, :, j].transpose(1, 2) / math.sqrt(self.d_k), dim=-1)  # (B, rep*S, S)
            groups.append((w @ v[:, :, j]).reshape(B, rep, S, self.d_k))
        out = torch.cat(groups, dim=1).transpose(1, 2).reshape(B, S, -1)  # heads back in order 0..h-1
        return self.W_o(out)

# expect: accepted
# alternative: heads folded into the batch for bmm, and the queries processed in chunks of 4 rows (a memory-bound
# habit): the chunks' outputs concatenated equal one pass
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

    def fold(self, x):
        B, S, d = x.shape
        return x.reshape(B, S, self.num_heads, d // self.num_heads).permute(0, 2, 1, 3).reshape(B * self.num_heads, S, -1)

    def forward(self, Q, K, V):
        B, Sq, d = Q.shape
        q, k, v = self.fold(self.W_q(Q)), self.fold(self.W_k(K)), self.fold(self.W_v(V))
        scale = 1.0 / math.sqrt(d // self.num_heads)
        outs = [torch.bmm(torch.softmax(torch.bmm(q[:, s:s + 4], k.transpose(1, 2)) * scale, dim=-1), v)
                for s in range(0, Sq, 4)]
        out = torch.cat(outs, dim=1).reshape(B, self.num_heads, Sq, -1).permute(0, 2, 1, 3).reshape(B, Sq, d)
        return self.W_o(out)

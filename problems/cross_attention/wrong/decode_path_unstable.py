# expect: wrong_answer
# mistake: a decoding fast path for one query token (Sq == 1) with a hand-written softmax exp(s) / sum exp(s), no
#   max subtracted: large activations overflow to inf/nan there (the general path uses torch.softmax)
import math

import torch
from torch import nn


class MultiHeadCrossAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.d_k = d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)

    def forward(self, x_q, x_kv):
        B, Sq, d_model = x_q.shape
        q = self.W_q(x_q).reshape(B, Sq, self.num_heads, self.d_k).transpose(1, 2)
        k = self.W_k(x_kv).reshape(B, -1, self.num_heads, self.d_k).transpose(1, 2)
        v = self.W_v(x_kv).reshape(B, -1, self.num_heads, self.d_k).transpose(1, 2)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)
        if Sq == 1:  # decoding step: one query, skip the softmax machinery
            e = torch.exp(scores)
            w = e / e.sum(-1, keepdim=True)
        else:
            w = torch.softmax(scores, dim=-1)
        out = (w @ v).transpose(1, 2).reshape(B, Sq, d_model)
        return self.W_o(out)

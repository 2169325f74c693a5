# expect: wrong_answer
# problem: cross_attention
# mistake: "a decoder's self-attention is masked": when the same tensor is passed as x_q and x_kv the layer applies
#   a causal mask. The contract says no mask, ever; no case passes one object as both arguments.
import math

import torch
from torch import nn


class MultiHeadCrossAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.h, self.dk = num_heads, d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)

    def forward(self, x_q, x_kv):
        B, Sq, D = x_q.shape
        Sk = x_kv.shape[1]
        q = self.W_q(x_q).view(B, Sq, self.h, self.dk).transpose(1, 2)
        k = self.W_k(x_kv).view(B, Sk, self.h, self.dk).transpose(1, 2)
        v = self.W_v(x_kv).view(B, Sk, self.h, self.dk).transpose(1, 2)
        s = q @ k.transpose(-2, -1) / math.sqrt(self.dk)
        if x_q is x_kv:  # self-attention in a decoder
            s = s.masked_fill(torch.ones(Sq, Sk, dtype=torch.bool, device=s.device).triu(1), float("-inf"))
        w = torch.softmax(s, dim=-1)
        return self.W_o((w @ v).transpose(1, 2).reshape(B, Sq, D))

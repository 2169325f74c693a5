# expect: wrong_answer
# mistake: a hand-written attention dropout that forgets the 1 / (1 - p) rescale: in training mode the output's
#   expectation shrinks by 1 - p (at p = 0.2; at 0.1 the training case, on 1024 copies, tells it only sometimes)
import math
import torch
from torch import nn


class MultiHeadCrossAttention(nn.Module):
    def __init__(self, d_model, num_heads, p=0.2):
        super().__init__()
        self.h, self.dk, self.p = num_heads, d_model // num_heads, p
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)

    def forward(self, x_q, x_kv):
        B, Sq, D = x_q.shape
        Skv = x_kv.shape[1]
        q = self.W_q(x_q).view(B, Sq, self.h, self.dk).transpose(1, 2)
        k = self.W_k(x_kv).view(B, Skv, self.h, self.dk).transpose(1, 2)
        v = self.W_v(x_kv).view(B, Skv, self.h, self.dk).transpose(1, 2)
        w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(self.dk), dim=-1)
        if self.training and self.p > 0:
            w = w * (torch.rand_like(w) > self.p)  # drop some attention weights
        return self.W_o((w @ v).transpose(1, 2).reshape(B, Sq, D))

# expect: wrong_output
# mistake: forward(self, memory, x): the encoder output first, so queries come from the memory
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

    def heads(self, t):
        return t.reshape(t.shape[0], t.shape[1], self.h, self.dk).transpose(1, 2)

    def forward(self, memory, x):
        q = self.heads(self.W_q(x))
        k, v = self.heads(self.W_k(memory)), self.heads(self.W_v(memory))
        w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(self.dk), dim=-1)
        return self.W_o((w @ v).transpose(1, 2).reshape(x.shape[0], x.shape[1], -1))

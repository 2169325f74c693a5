# expect: wrong_answer
# mistake: flattens the batch into the token axis before attending: every query attends over the memory tokens
# of every batch element, not only its own sentence's (right only when B == 1)
import math

import torch
from torch import nn


class MultiHeadCrossAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.h, self.d_k = num_heads, d_model // num_heads
        self.W_q, self.W_k = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
        self.W_v, self.W_o = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)

    def forward(self, x_q, x_kv):
        B, Sq, d = x_q.shape
        q = self.W_q(x_q).reshape(B * Sq, self.h, self.d_k).transpose(0, 1)  # (h, B*Sq, d_k)
        k = self.W_k(x_kv).reshape(-1, self.h, self.d_k).transpose(0, 1)  # (h, B*Skv, d_k)
        v = self.W_v(x_kv).reshape(-1, self.h, self.d_k).transpose(0, 1)
        weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(self.d_k), dim=-1)
        return self.W_o((weights @ v).transpose(0, 1).reshape(B, Sq, d))

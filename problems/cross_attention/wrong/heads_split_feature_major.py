# expect: wrong_answer
# mistake: splits heads with view(B, S, d_k, h) and moves the last dim: head h gets every h-th feature instead
# of the contiguous block [h*d_k, (h+1)*d_k)
import math

import torch
from torch import nn


class MultiHeadCrossAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.h, self.d_k = num_heads, d_model // num_heads
        self.W_q, self.W_k = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
        self.W_v, self.W_o = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)

    def heads(self, x):
        return x.reshape(x.shape[0], x.shape[1], self.d_k, self.h).permute(0, 3, 1, 2)  # (B, h, S, d_k)

    def merge(self, x):
        return x.permute(0, 2, 3, 1).reshape(x.shape[0], x.shape[2], -1)

    def forward(self, x_q, x_kv):
        q, k, v = self.heads(self.W_q(x_q)), self.heads(self.W_k(x_kv)), self.heads(self.W_v(x_kv))
        weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(self.d_k), dim=-1)
        return self.W_o(self.merge(weights @ v))

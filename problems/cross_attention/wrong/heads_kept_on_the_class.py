# expect: wrong_answer
# mistake: stores the head count on the class (MultiHeadCrossAttention.num_heads = ...), so every layer of a model uses the head count of the layer built last
import math

import torch
from torch import nn


class MultiHeadCrossAttention(nn.Module):
    num_heads = 1

    def __init__(self, d_model, num_heads):
        super().__init__()
        MultiHeadCrossAttention.num_heads = num_heads  # meant self.num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)

    def forward(self, x_q, x_kv):
        B, Sq, d_model = x_q.shape
        H = MultiHeadCrossAttention.num_heads
        d_k = d_model // H
        q = self.W_q(x_q).reshape(B, Sq, H, d_k).transpose(1, 2)
        k = self.W_k(x_kv).reshape(B, -1, H, d_k).transpose(1, 2)
        v = self.W_v(x_kv).reshape(B, -1, H, d_k).transpose(1, 2)
        weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d_k), dim=-1)
        return self.W_o((weights @ v).transpose(1, 2).reshape(B, Sq, d_model))

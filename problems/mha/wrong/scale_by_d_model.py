# expect: wrong_answer
# mistake: scales by sqrt(d_model) instead of sqrt(d_k)
import math

import torch
from torch import nn


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.num_heads, self.d_k = num_heads, d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)

    def forward(self, Q, K, V):
        B, Sq, D = Q.shape
        Sk = K.shape[1]
        H, dk = self.num_heads, self.d_k
        q = self.W_q(Q).view(B, Sq, H, dk).transpose(1, 2)
        k = self.W_k(K).view(B, Sk, H, dk).transpose(1, 2)
        v = self.W_v(V).view(B, Sk, H, dk).transpose(1, 2)
        w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(D), dim=-1)
        return self.W_o((w @ v).transpose(1, 2).reshape(B, Sq, D))

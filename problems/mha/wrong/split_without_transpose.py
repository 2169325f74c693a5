# expect: wrong_answer
# mistake: splits heads with view(B, H, S, d_k) directly, without the transpose
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
        q = self.W_q(Q).view(B, H, Sq, dk)
        k = self.W_k(K).view(B, H, Sk, dk)
        v = self.W_v(V).view(B, H, Sk, dk)
        w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(dk), dim=-1)
        return self.W_o((w @ v).reshape(B, Sq, D))

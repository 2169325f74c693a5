# expect: wrong_answer
# mistake: F.dropout(weights, p=0.1) without training=self.training: the functional form drops in eval mode too
import math

import torch
import torch.nn.functional as F
from torch import nn


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.h, self.dk = num_heads, d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)

    def forward(self, Q, K, V):
        B, Sq, D = Q.shape
        q = self.W_q(Q).reshape(B, Sq, self.h, self.dk).transpose(1, 2)
        k = self.W_k(K).reshape(B, -1, self.h, self.dk).transpose(1, 2)
        v = self.W_v(V).reshape(B, -1, self.h, self.dk).transpose(1, 2)
        w = F.dropout(torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(self.dk), dim=-1), p=0.1)
        return self.W_o((w @ v).transpose(1, 2).reshape(B, Sq, D))

# expect: accepted
# alternative: a standard MHA with nn.Dropout on the attention weights (p=0.1), which is off in eval mode
import math

import torch
from torch import nn


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.1):
        super().__init__()
        self.h, self.dk = num_heads, d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, Q, K, V):
        B = Q.shape[0]
        q = self.W_q(Q).reshape(B, -1, self.h, self.dk).transpose(1, 2)
        k = self.W_k(K).reshape(B, -1, self.h, self.dk).transpose(1, 2)
        v = self.W_v(V).reshape(B, -1, self.h, self.dk).transpose(1, 2)
        w = self.dropout(torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(self.dk), dim=-1))
        return self.W_o((w @ v).transpose(1, 2).reshape(B, -1, self.h * self.dk))

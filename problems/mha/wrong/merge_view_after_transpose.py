# expect: runtime_error
# mistake: merges heads with .view right after .transpose(1, 2): the tensor is not contiguous; use .reshape or .contiguous()
import math

import torch
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
        q = self.W_q(Q).view(B, Sq, self.h, self.dk).transpose(1, 2)
        k = self.W_k(K).view(B, K.shape[1], self.h, self.dk).transpose(1, 2)
        v = self.W_v(V).view(B, V.shape[1], self.h, self.dk).transpose(1, 2)
        w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(self.dk), dim=-1)
        return self.W_o((w @ v).transpose(1, 2).view(B, Sq, D))

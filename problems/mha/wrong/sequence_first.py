# expect: runtime_error
# mistake: follows nn.MultiheadAttention's default batch_first=False and reads the inputs as (S, B, d_model):
# the batch dim is taken for the sequence, so attention runs across batch elements
import math

import torch
from torch import nn


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.h, self.d_k = num_heads, d_model // num_heads
        self.W_q, self.W_k = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
        self.W_v, self.W_o = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)

    def forward(self, Q, K, V):
        Sq, B, d = Q.shape
        Sk = K.shape[0]
        q = self.W_q(Q).reshape(Sq, B * self.h, self.d_k).transpose(0, 1)
        k = self.W_k(K).reshape(Sk, B * self.h, self.d_k).transpose(0, 1)
        v = self.W_v(V).reshape(Sk, B * self.h, self.d_k).transpose(0, 1)
        weights = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(self.d_k), dim=-1)
        return self.W_o((weights @ v).transpose(0, 1).reshape(Sq, B, d))

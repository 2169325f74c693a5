# expect: wrong_answer
# mistake: a "fused QKV" speed-up that concatenates W_q, W_k, W_v on the first forward and keeps the result on self:
# after the caller changes the weights (an optimizer step) the layer still computes with the old ones
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
        self._fused = None

    def forward(self, Q, K, V):
        if self._fused is None:
            self._fused = (torch.cat([self.W_q.weight, self.W_k.weight, self.W_v.weight]),
                           torch.cat([self.W_q.bias, self.W_k.bias, self.W_v.bias]))
        w, b = self._fused
        D = Q.shape[-1]
        q = Q @ w[:D].T + b[:D]
        k = K @ w[D:2 * D].T + b[D:2 * D]
        v = V @ w[2 * D:].T + b[2 * D:]
        B, Sq, _ = Q.shape
        q = q.view(B, Sq, self.h, self.dk).transpose(1, 2)
        k = k.view(B, -1, self.h, self.dk).transpose(1, 2)
        v = v.view(B, -1, self.h, self.dk).transpose(1, 2)
        att = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(self.dk), dim=-1)
        return self.W_o((att @ v).transpose(1, 2).reshape(B, Sq, D))

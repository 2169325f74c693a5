# expect: wrong_answer
# mistake: activation checkpointing in training with torch.utils.checkpoint(use_reentrant=True), which builds a graph
#   only when an input needs a gradient: on inputs from a frozen layer the weights get no gradient
import math

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.h, self.d_k = num_heads, d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)

    def _attend(self, Q, K, V):
        B, Sq, d = Q.shape
        q = self.W_q(Q).view(B, Sq, self.h, self.d_k).transpose(1, 2)
        k = self.W_k(K).view(B, -1, self.h, self.d_k).transpose(1, 2)
        v = self.W_v(V).view(B, -1, self.h, self.d_k).transpose(1, 2)
        w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(self.d_k), dim=-1)
        return self.W_o((w @ v).transpose(1, 2).reshape(B, Sq, d))

    def forward(self, Q, K, V):
        if self.training:
            return checkpoint(self._attend, Q, K, V, use_reentrant=True)
        return self._attend(Q, K, V)

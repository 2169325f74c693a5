# expect: accepted
# alternative: activation checkpointing in training, torch.utils.checkpoint(use_reentrant=False): the layer is
#   recomputed in backward, and its weights get gradients whether or not its inputs need one
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
            return checkpoint(self._attend, Q, K, V, use_reentrant=False)
        return self._attend(Q, K, V)

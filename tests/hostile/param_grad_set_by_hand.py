# expect: wrong_answer
# problem: mha
# Right forward, right input gradients, but the weights are used detached, so no gradient reaches the
# parameters; to hide that, each parameter's .grad is set by hand to a one-element tensor (`.data`
# swaps its shape). A gradient whose shape is not its parameter's is a wrong gradient, never one to skip.
import math

import torch
import torch.nn.functional as F
from torch import nn


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.h, self.d_k = num_heads, d_model // num_heads
        self.W_q, self.W_k = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
        self.W_v, self.W_o = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)

    def forward(self, Q, K, V):
        for p in self.parameters():
            p.grad = torch.zeros_like(p)
            p.grad.data = torch.zeros(1, dtype=p.dtype)
        B, Sq, _ = Q.shape

        def lin(x, m):
            return F.linear(x, m.weight.detach(), m.bias.detach())

        def heads(x, m):
            return lin(x, m).reshape(B, x.shape[1], self.h, self.d_k).transpose(1, 2)

        q, k, v = heads(Q, self.W_q), heads(K, self.W_k), heads(V, self.W_v)
        a = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(self.d_k), -1) @ v
        return lin(a.transpose(1, 2).reshape(B, Sq, -1), self.W_o)

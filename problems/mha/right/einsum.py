# expect: accepted
# alternative: einsum with the head split written as a reshape of the last dim
import torch
from torch import nn


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.h = num_heads
        self.W_q, self.W_k, self.W_v, self.W_o = (nn.Linear(d_model, d_model) for _ in range(4))

    def forward(self, Q, K, V):
        B, Sq, D = Q.shape
        q = self.W_q(Q).unflatten(-1, (self.h, -1))  # (B, Sq, H, dk)
        k = self.W_k(K).unflatten(-1, (self.h, -1))
        v = self.W_v(V).unflatten(-1, (self.h, -1))
        scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / q.shape[-1] ** 0.5
        out = torch.einsum("bhqk,bkhd->bqhd", scores.softmax(-1), v)
        return self.W_o(out.flatten(-2))

# expect: wrong_answer
# problem: mha
# mistake: a self-attention fast path taken when `Q is K` (forgetting to also check `K is V`): it then uses Q
#   for the values too. layer(x, x, y) (queries and keys from one tensor, values from another) gets V = x.
#   No case passes one object as Q and K with a different V.
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
        if Q is K:  # self-attention
            V = Q
        B, Sq, D = Q.shape
        Sk = K.shape[1]
        q = self.W_q(Q).view(B, Sq, self.h, self.dk).transpose(1, 2)
        k = self.W_k(K).view(B, Sk, self.h, self.dk).transpose(1, 2)
        v = self.W_v(V).view(B, Sk, self.h, self.dk).transpose(1, 2)
        w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(self.dk), dim=-1)
        return self.W_o((w @ v).transpose(1, 2).reshape(B, Sq, D))

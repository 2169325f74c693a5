# expect: accepted
# alternative: textbook multi-head attention with a debug print of one output element
import math
import torch
from torch import nn


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.h, self.dk = num_heads, d_model // num_heads
        self.W_q, self.W_k, self.W_v, self.W_o = (nn.Linear(d_model, d_model) for _ in range(4))

    def forward(self, Q, K, V):
        B, Sq, _ = Q.shape
        Sk = K.shape[1]
        q = self.W_q(Q).view(B, Sq, self.h, self.dk).transpose(1, 2)
        k = self.W_k(K).view(B, Sk, self.h, self.dk).transpose(1, 2)
        v = self.W_v(V).view(B, Sk, self.h, self.dk).transpose(1, 2)
        a = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(self.dk), -1) @ v
        out = self.W_o(a.transpose(1, 2).reshape(B, Sq, -1))
        print("debug", out[0, 0, 0])
        return out

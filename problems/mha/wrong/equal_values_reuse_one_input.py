# expect: wrong_answer
# mistake: takes a self-attention path when Q, K and V hold the same numbers (torch.equal) and projects Q three times: forward right, gradients w.r.t. separate K and V tensors are lost
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
        if Q.shape == K.shape == V.shape and torch.equal(Q, K) and torch.equal(K, V):
            K = V = Q  # self-attention
        B, Sq, D = Q.shape
        Sk = K.shape[1]
        q = self.W_q(Q).view(B, Sq, self.h, self.dk).transpose(1, 2)
        k = self.W_k(K).view(B, Sk, self.h, self.dk).transpose(1, 2)
        v = self.W_v(V).view(B, Sk, self.h, self.dk).transpose(1, 2)
        out = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(self.dk), dim=-1) @ v
        return self.W_o(out.transpose(1, 2).reshape(B, Sq, D))

# expect: wrong_answer
# mistake: a decoding fast path (one query token) takes the query of batch element 0 for every sequence: right at
# batch 1, wrong for a batch of decoding steps
import math

import torch
import torch.nn as nn


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.h, self.dk, self.d = num_heads, d_model // num_heads, d_model
        self.W_q, self.W_k = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
        self.W_v, self.W_o = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)

    def forward(self, Q, K, V):
        B, Sq, _ = Q.shape
        Sk = K.shape[1]
        k = self.W_k(K).view(B, Sk, self.h, self.dk).transpose(1, 2)  # (B, H, Sk, dk)
        v = self.W_v(V).view(B, Sk, self.h, self.dk).transpose(1, 2)
        if Sq == 1:  # decoding: one query vector per head
            q = self.W_q(Q)[0, 0].view(self.h, self.dk)              # (H, dk): batch element 0's only
            s = (k * q[None, :, None, :]).sum(-1) / math.sqrt(self.dk)  # (B, H, Sk)
            o = (torch.softmax(s, -1).unsqueeze(-1) * v).sum(-2)       # (B, H, dk)
            return self.W_o(o.reshape(B, 1, self.d))
        q = self.W_q(Q).view(B, Sq, self.h, self.dk).transpose(1, 2)
        w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(self.dk), -1)
        return self.W_o((w @ v).transpose(1, 2).reshape(B, Sq, self.d))

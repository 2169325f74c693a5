# expect: accepted
# alternative: Whisper/BART's key projection without its bias (F.linear with W_k.weight alone): the bias shifts every score
# of a query by one constant, which the softmax cancels, so W_k.bias's exact gradient is 0 and it gets none
import math
import torch
import torch.nn as nn
import torch.nn.functional as F


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.h = num_heads
        self.d_k = d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)

    def forward(self, Q, K, V):
        B, Sq, _ = Q.shape
        Sk = K.shape[1]
        q = self.W_q(Q).view(B, Sq, self.h, self.d_k).transpose(1, 2)
        # Whisper: k_proj has no bias -- a per-query constant is softmax-invariant
        k = F.linear(K, self.W_k.weight).view(B, Sk, self.h, self.d_k).transpose(1, 2)
        v = self.W_v(V).view(B, Sk, self.h, self.d_k).transpose(1, 2)
        w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(self.d_k), dim=-1)  # (B, h, Sq, Sk)
        out = (w @ v).transpose(1, 2).reshape(B, Sq, -1)
        return self.W_o(out)

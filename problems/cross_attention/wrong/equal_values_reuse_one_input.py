# expect: wrong_answer
# mistake: treats the call as self-attention when x_kv holds the same numbers as x_q (torch.equal) and reads keys/values from x_q: forward right, x_kv's gradient is lost
import math
import torch
from torch import nn


class MultiHeadCrossAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.h, self.dk = num_heads, d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)

    def forward(self, x_q, x_kv):
        if x_q.shape == x_kv.shape and torch.equal(x_q, x_kv):
            x_kv = x_q  # self-attention
        B, Sq, D = x_q.shape
        Sk = x_kv.shape[1]
        q = self.W_q(x_q).view(B, Sq, self.h, self.dk).transpose(1, 2)
        k = self.W_k(x_kv).view(B, Sk, self.h, self.dk).transpose(1, 2)
        v = self.W_v(x_kv).view(B, Sk, self.h, self.dk).transpose(1, 2)
        s = q @ k.transpose(-1, -2) / math.sqrt(self.dk)
        out = torch.softmax(s, dim=-1) @ v
        return self.W_o(out.transpose(1, 2).reshape(B, Sq, D))

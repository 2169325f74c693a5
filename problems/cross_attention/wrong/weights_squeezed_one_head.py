# expect: runtime_error
# mistake: attention map squeezed with .squeeze(1) (for logging) before @ v: a no-op for H > 1, but with one head the (B, 1, Sq, Skv) map loses its head axis and the later reshape fails
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
        B, Sq, D = x_q.shape
        Skv = x_kv.shape[1]
        q = self.W_q(x_q).view(B, Sq, self.h, self.dk).transpose(1, 2)
        k = self.W_k(x_kv).view(B, Skv, self.h, self.dk).transpose(1, 2)
        v = self.W_v(x_kv).view(B, Skv, self.h, self.dk).transpose(1, 2)
        attn = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(self.dk), dim=-1).squeeze(1)
        o = (attn @ v)[:B] if attn.dim() == 3 else attn @ v        # (B, H, Sq, dk)
        o = o.reshape(B, self.h, Sq, self.dk) if o.dim() == 4 and o.shape[1] != self.h else o
        return self.W_o(o.transpose(1, 2).reshape(B, Sq, D))

# expect: wrong_answer
# mistake: a fused torch.autograd.Function whose backward takes dV = P @ dO when the weights are square
# (Sq == Skv) instead of P^T @ dO: only gradients, and only when both sequences have the same length
import math

import torch
from torch import nn


class MultiHeadCrossAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.d_k = d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)

    def forward(self, x_q, x_kv):
        B, Sq, d = x_q.shape
        Skv = x_kv.shape[1]
        H, dk = self.num_heads, self.d_k
        q = self.W_q(x_q).view(B, Sq, H, dk).transpose(1, 2)
        k = self.W_k(x_kv).view(B, Skv, H, dk).transpose(1, 2)
        v = self.W_v(x_kv).view(B, Skv, H, dk).transpose(1, 2)
        out = _Attn.apply(q, k, v)
        return self.W_o(out.transpose(1, 2).reshape(B, Sq, d))


class _Attn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v):
        scale = q.shape[-1] ** -0.5
        P = torch.softmax(q @ k.transpose(-2, -1) * scale, dim=-1)
        ctx.save_for_backward(q, k, v, P)
        ctx.scale = scale
        return P @ v

    @staticmethod
    def backward(ctx, dO):
        q, k, v, P = ctx.saved_tensors
        dP = dO @ v.transpose(-2, -1)
        dS = P * (dP - (dP * P).sum(-1, keepdim=True)) * ctx.scale
        if P.shape[-1] == P.shape[-2]:
            dV = P @ dO
        else:
            dV = P.transpose(-2, -1) @ dO
        return dS @ k, dS.transpose(-2, -1) @ q, dV

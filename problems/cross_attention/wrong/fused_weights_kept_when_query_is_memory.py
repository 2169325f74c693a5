# expect: wrong_answer
# mistake: at inference (torch.no_grad) a self-attention-shaped call (x_q is x_kv) goes through one fused QKV matmul whose weights are concatenated once and kept on self: after an optimizer step, evaluation still uses the old weights
import math

import torch
from torch import nn


class MultiHeadCrossAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.num_heads, self.d_k = num_heads, d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)
        self._fused = None

    def split(self, x):
        B, S, _ = x.shape
        return x.reshape(B, S, self.num_heads, self.d_k).transpose(1, 2)

    def forward(self, x_q, x_kv):
        B, Sq, d = x_q.shape
        if x_q is x_kv and not torch.is_grad_enabled():
            if self._fused is None:  # fuse once for inference
                self._fused = (torch.cat([self.W_q.weight, self.W_k.weight, self.W_v.weight]),
                               torch.cat([self.W_q.bias, self.W_k.bias, self.W_v.bias]))
            w, b = self._fused
            q, k, v = (self.split(t) for t in torch.nn.functional.linear(x_q, w, b).split(d, dim=-1))
        else:
            q, k, v = self.split(self.W_q(x_q)), self.split(self.W_k(x_kv)), self.split(self.W_v(x_kv))
        att = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(self.d_k), dim=-1)
        return self.W_o((att @ v).transpose(1, 2).reshape(B, Sq, d))

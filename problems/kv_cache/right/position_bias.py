# expect: accepted
# alternative: an additive float mask from position indices (key_pos > query_pos -> -inf), cache kept as a tuple
import math

import torch
from torch import nn


class KVCacheAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.h, self.dk = num_heads, d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)

    def split(self, x):
        return x.reshape(x.shape[0], x.shape[1], self.h, self.dk).transpose(1, 2)

    def forward(self, x, cache=None):
        B, S, D = x.shape
        q, k, v = self.split(self.W_q(x)), self.split(self.W_k(x)), self.split(self.W_v(x))
        past_k, past_v = cache if cache is not None else (k[:, :, :0], v[:, :, :0])
        k, v = torch.cat([past_k, k], 2), torch.cat([past_v, v], 2)
        q_pos = torch.arange(past_k.shape[2], k.shape[2], device=x.device)
        k_pos = torch.arange(k.shape[2], device=x.device)
        bias = torch.zeros(S, k.shape[2], dtype=q.dtype, device=x.device)
        bias = bias.masked_fill(k_pos[None, :] > q_pos[:, None], float("-inf"))
        w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(self.dk) + bias, dim=-1)
        return self.W_o((w @ v).transpose(1, 2).reshape(B, S, D)), (k, v)

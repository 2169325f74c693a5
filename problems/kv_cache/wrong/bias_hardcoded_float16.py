# expect: runtime_error
# mistake: an additive -inf causal bias hard-coded in float16 ("for half precision"): with bfloat16 inputs
# the scores become float32 and meet bfloat16 values in the next matrix product
import math

import torch
from torch import nn


class KVCacheAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.d_k = d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)

    def forward(self, x, cache=None):
        B, S, d = x.shape
        q = self.W_q(x).view(B, S, self.num_heads, self.d_k).permute(0, 2, 1, 3)
        k = self.W_k(x).view(B, S, self.num_heads, self.d_k).permute(0, 2, 1, 3)
        v = self.W_v(x).view(B, S, self.num_heads, self.d_k).permute(0, 2, 1, 3)
        if cache is not None:
            past_k, past_v = cache
            k = torch.cat((past_k, k), dim=-2)
            v = torch.cat((past_v, v), dim=-2)
        T = k.shape[-2]
        full = torch.full((T, T), float("-inf"), dtype=torch.float16, device=x.device).triu(1)
        bias = full[T - S:]
        s = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.d_k) + bias
        p = torch.softmax(s, dim=-1)
        out = torch.matmul(p, v).permute(0, 2, 1, 3).contiguous().view(B, S, -1)
        return self.W_o(out), (k, v)

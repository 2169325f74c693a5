# expect: wrong_answer
# mistake: absolute positions made with torch.arange in the inputs' dtype (causal_attention's
# positions_in_input_dtype, with the cache offset): in bfloat16 whole numbers are exact only up to 256, so past 256
# cached + new tokens position 257 rounds to 256 (259 to 260) and a token sees the next one
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
        if cache is not None:
            k, v = torch.cat((cache[0], k), dim=-2), torch.cat((cache[1], v), dim=-2)
        past = k.shape[2] - S
        q_pos = torch.arange(past, past + S, device=x.device, dtype=x.dtype)
        k_pos = torch.arange(k.shape[2], device=x.device, dtype=x.dtype)
        allowed = k_pos[None, :] <= q_pos[:, None]
        s = torch.einsum("bhqd,bhkd->bhqk", q, k) / self.dk ** 0.5
        w = torch.where(allowed, s, float("-inf")).softmax(-1)
        out = torch.einsum("bhqk,bhkd->bqhd", w, v).reshape(B, S, D)
        return self.W_o(out), (k, v)

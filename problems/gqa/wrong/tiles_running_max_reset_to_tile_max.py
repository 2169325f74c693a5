# expect: wrong_answer
# mistake: flash-style GQA over key tiles of 128: after each tile it stores the tile's own max as the running max (m = tile_max instead of m = m_new), so once a later tile has a lower max than an earlier one the accumulator is rescaled against the wrong reference on the next tile; exact with one or two key tiles (S <= 256)
import math
import torch
from torch import nn


class GroupQueryAttention(nn.Module):
    def __init__(self, d_model, num_heads, num_kv_heads):
        super().__init__()
        self.h, self.hkv = num_heads, num_kv_heads
        self.dk = d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, num_kv_heads * self.dk)
        self.W_v = nn.Linear(d_model, num_kv_heads * self.dk)
        self.W_o = nn.Linear(d_model, d_model)

    def forward(self, x):
        B, S, dm = x.shape
        rep = self.h // self.hkv
        q = self.W_q(x).view(B, S, self.hkv, rep, self.dk).permute(0, 2, 3, 1, 4)  # B,hkv,rep,S,dk
        k = self.W_k(x).view(B, S, self.hkv, self.dk).transpose(1, 2)[:, :, None]  # B,hkv,1,S,dk
        v = self.W_v(x).view(B, S, self.hkv, self.dk).transpose(1, 2)[:, :, None]
        T = 128
        scale = 1.0 / math.sqrt(self.dk)
        m = torch.full(q.shape[:-1] + (1,), float("-inf"), dtype=x.dtype, device=x.device)
        l = torch.zeros_like(m)
        acc = torch.zeros_like(q)
        for ks in range(0, S, T):
            s = q @ k[..., ks:ks + T, :].transpose(-2, -1) * scale
            tile_max = s.amax(-1, keepdim=True)
            m_new = torch.maximum(m, tile_max)
            p = torch.exp(s - m_new)
            alpha = torch.exp(m - m_new)
            l = alpha * l + p.sum(-1, keepdim=True)
            acc = alpha * acc + p @ v[..., ks:ks + T, :]
            m = tile_max
        o = (acc / l).reshape(B, self.h, S, self.dk).transpose(1, 2).reshape(B, S, dm)
        return self.W_o(o)

# expect: wrong_answer
# mistake: flash-style GQA over 128-key tiles that rescales only `if (m_new > m).all():`; exact for S <= 128
import math
import torch
from torch import nn


def _tiled(q, k, v, scale, allow=None, kstart=0, kend=None, skip=None):
    Lk = k.shape[-2] if kend is None else kend
    T = 128
    m = torch.full(q.shape[:-1] + (1,), float("-inf"), dtype=torch.float32, device=q.device)
    l = torch.zeros_like(m)
    acc = torch.zeros(q.shape[:-1] + (v.shape[-1],), dtype=torch.float32, device=q.device)
    for ks in range(kstart, Lk, T):
        ke = min(ks + T, Lk)
        if skip is not None and skip(ks, ke):
            continue
        s = (q @ k[..., ks:ke, :].transpose(-2, -1)).float() * scale
        if allow is not None:
            s = s.masked_fill(~allow(ks, ke), float("-inf"))
        tile_max = s.amax(-1, keepdim=True)
        m_new = torch.maximum(m, tile_max)
        if (m_new > m).all():  # rescale only when the max moved
            alpha = torch.exp(m - m_new)
            l = alpha * l
            acc = alpha * acc
            m = m_new
        p = torch.exp(s - m)
        l = l + p.sum(-1, keepdim=True)
        acc = acc + p @ v[..., ks:ke, :].float()
    return (acc / l).to(q.dtype)


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
        q = self.W_q(x).view(B, S, self.hkv, rep, self.dk).permute(0, 2, 3, 1, 4)
        k = self.W_k(x).view(B, S, self.hkv, self.dk).transpose(1, 2)[:, :, None]
        v = self.W_v(x).view(B, S, self.hkv, self.dk).transpose(1, 2)[:, :, None]
        o = _tiled(q, k, v, 1.0 / math.sqrt(self.dk))
        return self.W_o(o.reshape(B, self.h, S, self.dk).transpose(1, 2).reshape(B, S, dm))

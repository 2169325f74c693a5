# expect: wrong_answer
# mistake: online softmax over key tiles of 128 storing the tile's own max as the running max (m = tile_max): wrong rescale from the third tile on when a tile's max drops; exact for Sk <= 256
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
        safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
        p = torch.exp(s - safe)
        alpha = torch.exp(m - safe)
        l = alpha * l + p.sum(-1, keepdim=True)
        acc = alpha * acc + p @ v[..., ks:ke, :].float()
        m = tile_max
    return (acc / l).to(q.dtype)


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.h = num_heads
        self.dk = d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)

    def forward(self, Q, K, V):
        B, Sq, dm = Q.shape
        Sk = K.shape[1]
        q = self.W_q(Q).view(B, Sq, self.h, self.dk).transpose(1, 2)
        k = self.W_k(K).view(B, Sk, self.h, self.dk).transpose(1, 2)
        v = self.W_v(V).view(B, Sk, self.h, self.dk).transpose(1, 2)
        o = _tiled(q, k, v, 1.0 / math.sqrt(self.dk))
        return self.W_o(o.transpose(1, 2).reshape(B, Sq, dm))

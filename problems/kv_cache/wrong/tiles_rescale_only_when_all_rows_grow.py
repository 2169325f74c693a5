# expect: wrong_answer
# mistake: online softmax over key tiles of 64 that rescales only `if (m_new > m).all():`: rows whose max grew on a tile where another row's did not keep stale scaling; exact while L <= 64
import math
import torch
from torch import nn


def _tiled(q, k, v, scale, allow=None, kstart=0, kend=None, skip=None):
    Lk = k.shape[-2] if kend is None else kend
    T = 64
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


class KVCacheAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.h = num_heads
        self.dk = d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)

    def forward(self, x, cache=None):
        B, S, dm = x.shape
        q = self.W_q(x).view(B, S, self.h, self.dk).transpose(1, 2)
        k = self.W_k(x).view(B, S, self.h, self.dk).transpose(1, 2)
        v = self.W_v(x).view(B, S, self.h, self.dk).transpose(1, 2)
        if cache is not None:
            k = torch.cat([cache[0], k], dim=2)
            v = torch.cat([cache[1], v], dim=2)
        L = k.shape[2]
        P = L - S
        scale = 1.0 / math.sqrt(self.dk)
        outs = []
        for qs in range(0, S, 64):
            qe = min(qs + 64, S)
            rows = torch.arange(P + qs, P + qe, device=x.device)[:, None]
            allow = lambda ks, ke, rows=rows: torch.arange(ks, ke, device=x.device)[None, :] <= rows
            outs.append(_tiled(q[:, :, qs:qe], k, v, scale, allow, kend=P + qe, skip=None))
        o = torch.cat(outs, dim=2)
        out = self.W_o(o.transpose(1, 2).reshape(B, S, dm))
        return out, (k, v)

# expect: wrong_answer
# mistake: slow path: online softmax over key tiles of 64 that rescales only `if (m_new > m).all():`: rows whose max grew on a tile where another row's did not keep stale scaling
import math
import torch
import torch.nn.functional as F
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


def rotate_half(x):
    d = x.shape[-1] // 2
    return torch.cat((-x[..., d:], x[..., :d]), dim=-1)


class Attention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.nh = config.num_attention_heads
        self.nkv = config.num_key_value_heads or config.num_attention_heads
        self.rep = self.nh // self.nkv
        self.hd = config.hidden_size // config.num_attention_heads
        self.q_proj = nn.Linear(config.hidden_size, self.nh * self.hd, bias=False)
        self.k_proj = nn.Linear(config.hidden_size, self.nkv * self.hd, bias=False)
        self.v_proj = nn.Linear(config.hidden_size, self.nkv * self.hd, bias=False)
        self.o_proj = nn.Linear(self.nh * self.hd, config.hidden_size, bias=False)
        self.dropout = config.dropout
        self.attn_dropout = nn.Dropout(config.dropout)
        self.flash = config.flash_attn

    def forward(self, x, position_embeddings, past_key_value=None, use_cache=False, attention_mask=None):
        B, S, _ = x.shape
        cos, sin = position_embeddings
        q = self.q_proj(x).view(B, S, self.nh, self.hd)
        k = self.k_proj(x).view(B, S, self.nkv, self.hd)
        v = self.v_proj(x).view(B, S, self.nkv, self.hd)
        c, s_ = cos[:, None, :], sin[:, None, :]
        q = q * c + rotate_half(q) * s_
        k = k * c + rotate_half(k) * s_
        if past_key_value is not None:
            k = torch.cat([past_key_value[0], k], dim=1)
            v = torch.cat([past_key_value[1], v], dim=1)
        past_kv = (k, v) if use_cache else None
        L = k.shape[1]
        P = L - S
        qh = q.transpose(1, 2)
        kh = k.transpose(1, 2).repeat_interleave(self.rep, dim=1) if self.rep > 1 else k.transpose(1, 2)
        vh = v.transpose(1, 2).repeat_interleave(self.rep, dim=1) if self.rep > 1 else v.transpose(1, 2)
        pad = attention_mask[:, None, None, :].bool() if attention_mask is not None else None
        if self.flash or (self.training and self.dropout > 0):
            rows = torch.arange(P, L, device=x.device)[:, None]
            cols = torch.arange(L, device=x.device)[None, :]
            allow = (cols <= rows)[None, None]
            if pad is not None:
                allow = allow & pad
            dp = self.dropout if self.training else 0.0
            out = F.scaled_dot_product_attention(qh, kh, vh, attn_mask=allow, dropout_p=dp)
        else:
            scale = 1.0 / math.sqrt(self.hd)
            outs = []
            for qs in range(0, S, 64):
                qe = min(qs + 64, S)
                rows = torch.arange(P + qs, P + qe, device=x.device)[:, None]

                def allow(ks, ke, rows=rows):
                    a = (torch.arange(ks, ke, device=x.device)[None, :] <= rows)[None, None]
                    return a & pad[..., ks:ke] if pad is not None else a
                outs.append(_tiled(qh[:, :, qs:qe], kh, vh, scale, allow, kend=P + qe, skip=None))
            out = torch.cat(outs, dim=2)
        out = out.transpose(1, 2).reshape(B, S, -1)
        return self.o_proj(out), past_kv

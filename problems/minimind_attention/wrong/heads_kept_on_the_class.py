# expect: runtime_error
# mistake: keeps the head counts on the class (Attention.n_local_heads = ...), so every layer of a model uses the head counts of the layer built last
import math

import torch
import torch.nn.functional as F
from torch import nn


def rotate_half(x):
    d = x.shape[-1] // 2
    return torch.cat((-x[..., d:], x[..., :d]), dim=-1)


class Attention(nn.Module):
    n_local_heads = 1
    n_local_kv_heads = 1

    def __init__(self, config):
        super().__init__()
        kv = config.num_key_value_heads or config.num_attention_heads
        Attention.n_local_heads = config.num_attention_heads  # meant self.
        Attention.n_local_kv_heads = kv
        self.head_dim = config.hidden_size // config.num_attention_heads
        self.q_proj = nn.Linear(config.hidden_size, config.num_attention_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(config.hidden_size, kv * self.head_dim, bias=False)
        self.v_proj = nn.Linear(config.hidden_size, kv * self.head_dim, bias=False)
        self.o_proj = nn.Linear(config.num_attention_heads * self.head_dim, config.hidden_size, bias=False)
        self.dropout = config.dropout
        self.attn_dropout = nn.Dropout(config.dropout)

    def forward(self, x, position_embeddings, past_key_value=None, use_cache=False, attention_mask=None):
        B, S, _ = x.shape
        H, Hkv, hd = Attention.n_local_heads, Attention.n_local_kv_heads, self.head_dim
        q = self.q_proj(x).view(B, S, H, hd)
        k = self.k_proj(x).view(B, S, Hkv, hd)
        v = self.v_proj(x).view(B, S, Hkv, hd)
        cos, sin = position_embeddings
        cos, sin = cos[:, None, :], sin[:, None, :]
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if past_key_value is not None:
            k = torch.cat([past_key_value[0], k], dim=1)
            v = torch.cat([past_key_value[1], v], dim=1)
        past_kv = (k, v) if use_cache else None
        n_rep = H // Hkv
        kr = k[:, :, :, None, :].expand(B, k.shape[1], Hkv, n_rep, hd).reshape(B, k.shape[1], H, hd)
        vr = v[:, :, :, None, :].expand(B, v.shape[1], Hkv, n_rep, hd).reshape(B, v.shape[1], H, hd)
        q, kr, vr = q.transpose(1, 2), kr.transpose(1, 2), vr.transpose(1, 2)
        T = kr.shape[2]
        s = q @ kr.transpose(-2, -1) / math.sqrt(hd)
        qpos = torch.arange(T - S, T, device=x.device)[:, None]
        kpos = torch.arange(T, device=x.device)[None, :]
        allowed = (kpos <= qpos)[None, None]
        if attention_mask is not None:
            allowed = allowed & attention_mask.bool()[:, None, None, :]
        s = s.masked_fill(~allowed, float("-inf"))
        w = torch.softmax(s.float(), dim=-1).type_as(q)
        w = self.attn_dropout(w)
        out = (w @ vr).transpose(1, 2).reshape(B, S, -1)
        return self.o_proj(out), past_kv

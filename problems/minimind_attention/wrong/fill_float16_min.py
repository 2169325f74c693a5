# expect: wrong_answer
# mistake: fills masked scores (future and padding) with torch.finfo(torch.float16).min (-65504, "safe in half
# precision") in every dtype: in float32 or bfloat16 a token whose visible scores are all below -65504 looks at
# masked keys
import math

import torch
import torch.nn.functional as F
from torch import nn


def rotate_half(x):
    d = x.shape[-1] // 2
    return torch.cat((-x[..., d:], x[..., :d]), dim=-1)


def repeat_kv(x, n_rep):
    if n_rep == 1:
        return x
    B, S, H, D = x.shape
    return x[:, :, :, None, :].expand(B, S, H, n_rep, D).reshape(B, S, H * n_rep, D)


class Attention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.n_heads = config.num_attention_heads
        self.n_kv = config.num_key_value_heads or config.num_attention_heads
        self.n_rep = self.n_heads // self.n_kv
        self.hd = config.hidden_size // self.n_heads
        self.q_proj = nn.Linear(config.hidden_size, self.n_heads * self.hd, bias=False)
        self.k_proj = nn.Linear(config.hidden_size, self.n_kv * self.hd, bias=False)
        self.v_proj = nn.Linear(config.hidden_size, self.n_kv * self.hd, bias=False)
        self.o_proj = nn.Linear(self.n_heads * self.hd, config.hidden_size, bias=False)
        self.dropout = config.dropout
        self.attn_dropout = nn.Dropout(config.dropout)
        self.flash = config.flash_attn

    def forward(self, x, position_embeddings, past_key_value=None, use_cache=False, attention_mask=None):
        B, S, _ = x.shape
        q = self.q_proj(x).view(B, S, self.n_heads, self.hd)
        k = self.k_proj(x).view(B, S, self.n_kv, self.hd)
        v = self.v_proj(x).view(B, S, self.n_kv, self.hd)
        cos, sin = position_embeddings
        cos, sin = cos[None, :, None, :], sin[None, :, None, :]
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        if past_key_value is not None:
            k = torch.cat([past_key_value[0], k], dim=1)
            v = torch.cat([past_key_value[1], v], dim=1)
        past_kv = (k, v) if use_cache else None
        q = q.transpose(1, 2)
        k = repeat_kv(k, self.n_rep).transpose(1, 2)
        v = repeat_kv(v, self.n_rep).transpose(1, 2)
        T = k.shape[2]
        allowed = torch.ones(S, T, dtype=torch.bool, device=x.device).tril(T - S)
        if attention_mask is not None:
            allowed = allowed & attention_mask[:, None, None, :].bool()
        s = (q @ k.transpose(-2, -1) / math.sqrt(self.hd)).masked_fill(~allowed, torch.finfo(torch.float16).min)
        out = self.attn_dropout(s.softmax(-1)) @ v
        return self.o_proj(out.transpose(1, 2).reshape(B, S, -1)), past_kv

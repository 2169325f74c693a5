# expect: accepted
# alternative: queries grouped under their KV head, no repetition, einsum
import math

import torch
import torch.nn.functional as F
from torch import nn


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


class Attention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.h = config.num_attention_heads
        self.kv = config.num_key_value_heads or self.h
        self.hd = config.hidden_size // self.h
        self.q_proj = nn.Linear(config.hidden_size, self.h * self.hd, bias=False)
        self.k_proj = nn.Linear(config.hidden_size, self.kv * self.hd, bias=False)
        self.v_proj = nn.Linear(config.hidden_size, self.kv * self.hd, bias=False)
        self.o_proj = nn.Linear(self.h * self.hd, config.hidden_size, bias=False)
        self.p = config.dropout
        self.flash = config.flash_attn

    def forward(self, x, position_embeddings, past_key_value=None, use_cache=False, attention_mask=None):
        B, S, _ = x.shape
        q = self.q_proj(x).view(B, S, self.h, self.hd)
        k = self.k_proj(x).view(B, S, self.kv, self.hd)
        v = self.v_proj(x).view(B, S, self.kv, self.hd)
        cos, sin = position_embeddings
        cos, sin = cos[None, :S, None], sin[None, :S, None]
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        if past_key_value is not None:
            k = torch.cat([past_key_value[0], k], dim=1)
            v = torch.cat([past_key_value[1], v], dim=1)
        past_kv = (k, v) if use_cache else None
        n_rep = self.h // self.kv
        T = k.shape[1]
        mask = torch.ones(S, T, dtype=torch.bool, device=x.device).tril(T - S)[None, None]
        if attention_mask is not None:
            mask = mask & (attention_mask[:, None, None, :] == 1)
        qg = q.view(B, S, self.kv, n_rep, self.hd)
        s = torch.einsum("bsgrd,btgd->bgrst", qg, k) / math.sqrt(self.hd)  # (B, Hkv, n_rep, S, T)
        w = F.dropout(s.masked_fill(~mask[:, :, None], float("-inf")).softmax(-1), self.p, self.training)
        out = torch.einsum("bgrst,btgd->bsgrd", w, v).reshape(B, S, -1)
        return self.o_proj(out), past_kv

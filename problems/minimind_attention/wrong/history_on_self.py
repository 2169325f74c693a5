# expect: runtime_error
# mistake: keeps the cached keys/values on self and ignores past_key_value (fine for one sequence, wrong for any other)
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
        self.attn_dropout = nn.Dropout(config.dropout)
        self.dropout = config.dropout
        self.flash = config.flash_attn
        self.history = None

    def forward(self, x, position_embeddings, past_key_value=None, use_cache=False, attention_mask=None):
        B, S, _ = x.shape
        q = self.q_proj(x).view(B, S, self.h, self.hd)
        k = self.k_proj(x).view(B, S, self.kv, self.hd)
        v = self.v_proj(x).view(B, S, self.kv, self.hd)
        cos, sin = position_embeddings
        cos, sin = cos[None, :, None], sin[None, :, None]
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        if past_key_value is not None and self.history is not None:  # continue our own copy
            k = torch.cat([self.history[0], k], dim=1)
            v = torch.cat([self.history[1], v], dim=1)
        self.history = (k, v)
        past_kv = (k, v) if use_cache else None
        n_rep = self.h // self.kv
        q = q.transpose(1, 2)
        k = k.repeat_interleave(n_rep, dim=2).transpose(1, 2)
        v = v.repeat_interleave(n_rep, dim=2).transpose(1, 2)
        T = k.shape[2]
        mask = torch.ones(S, T, dtype=torch.bool, device=x.device).tril(T - S)[None, None]
        if attention_mask is not None:
            mask = mask & (attention_mask[:, None, None, :] == 1)
        if self.flash:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=self.dropout if self.training else 0.0)
        else:
            s = (q @ k.transpose(-2, -1) / math.sqrt(self.hd)).masked_fill(~mask, float("-inf"))
            out = self.attn_dropout(torch.softmax(s, dim=-1)) @ v
        return self.o_proj(out.transpose(1, 2).reshape(B, S, -1)), past_kv

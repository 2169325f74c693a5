# expect: runtime_error
# mistake: registers a causal mask buffer for a 2048-token context in __init__ and slices rows [S_past:S_total]; once cache plus new tokens pass 2048 the slice is short and the mask fails to broadcast
import math

import torch
import torch.nn.functional as F
from torch import nn


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin):
    cos, sin = cos[None, :, None, :], sin[None, :, None, :]  # (1, S, 1, head_dim)
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


def repeat_kv(x, n_rep):
    if n_rep == 1:
        return x
    B, S, H_kv, D = x.shape
    return x[:, :, :, None, :].expand(B, S, H_kv, n_rep, D).reshape(B, S, H_kv * n_rep, D)


class Attention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.n_heads = config.num_attention_heads
        self.n_kv_heads = config.num_key_value_heads or config.num_attention_heads
        self.n_rep = self.n_heads // self.n_kv_heads
        self.head_dim = config.hidden_size // self.n_heads
        self.q_proj = nn.Linear(config.hidden_size, self.n_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(config.hidden_size, self.n_kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(config.hidden_size, self.n_kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(self.n_heads * self.head_dim, config.hidden_size, bias=False)
        self.attn_dropout = nn.Dropout(config.dropout)
        self.resid_dropout = nn.Dropout(config.dropout)
        self.dropout = config.dropout
        self.flash = config.flash_attn
        max_len = 2048  # context length of the small model
        self.register_buffer("causal_mask", torch.ones(max_len, max_len, dtype=torch.bool).tril(), persistent=False)

    def forward(self, x, position_embeddings, past_key_value=None, use_cache=False, attention_mask=None):
        B, S, _ = x.shape
        q = self.q_proj(x).view(B, S, self.n_heads, self.head_dim)  # (B, S, H, hd)
        k = self.k_proj(x).view(B, S, self.n_kv_heads, self.head_dim)  # (B, S, H_kv, hd)
        v = self.v_proj(x).view(B, S, self.n_kv_heads, self.head_dim)
        cos, sin = position_embeddings
        q, k = apply_rotary_pos_emb(q, k, cos[:S], sin[:S])
        if past_key_value is not None:
            k = torch.cat([past_key_value[0], k], dim=1)  # (B, S_total, H_kv, hd)
            v = torch.cat([past_key_value[1], v], dim=1)
        past_kv = (k, v) if use_cache else None

        q = q.transpose(1, 2)  # (B, H, S, hd)
        k = repeat_kv(k, self.n_rep).transpose(1, 2)  # (B, H, S_total, hd)
        v = repeat_kv(v, self.n_rep).transpose(1, 2)
        S_total = k.shape[2]
        # causal over absolute positions: query t sits at S_total - S + t
        mask = self.causal_mask[S_total - S:S_total, :S_total]
        mask = mask[None, None]  # (1, 1, S, S_total)
        if attention_mask is not None:
            mask = mask & attention_mask[:, None, None, :].bool()  # (B, 1, S, S_total): no padded keys

        if self.flash:
            p = self.dropout if self.training else 0.0
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)
        else:
            scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)  # (B, H, S, S_total)
            scores = scores.masked_fill(~mask, float("-inf"))
            weights = self.attn_dropout(torch.softmax(scores, dim=-1))
            out = weights @ v  # (B, H, S, hd)
        out = out.transpose(1, 2).reshape(B, S, -1)  # (B, S, H * hd)
        return self.resid_dropout(self.o_proj(out)), past_kv

# expect: accepted
# alternative: no repeat_kv: the fused kernel's enable_gqa=True groups query heads over the KV heads (head h reads
# KV head h // n_rep), with one boolean mask for causality over absolute positions and the padding; the slow path
# repeats the KV heads with an index instead
import math

import torch
import torch.nn.functional as F
from torch import nn


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Attention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.n_heads = config.num_attention_heads
        self.n_kv_heads = config.num_key_value_heads or config.num_attention_heads
        self.head_dim = config.hidden_size // config.num_attention_heads
        self.q_proj = nn.Linear(config.hidden_size, self.n_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(config.hidden_size, self.n_kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(config.hidden_size, self.n_kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(self.n_heads * self.head_dim, config.hidden_size, bias=False)
        self.dropout = config.dropout
        self.flash = config.flash_attn
        self.attn_dropout = nn.Dropout(config.dropout)

    def forward(self, x, position_embeddings, past_key_value=None, use_cache=False, attention_mask=None):
        B, S, _ = x.shape
        q = self.q_proj(x).unflatten(-1, (self.n_heads, self.head_dim))
        k = self.k_proj(x).unflatten(-1, (self.n_kv_heads, self.head_dim))
        v = self.v_proj(x).unflatten(-1, (self.n_kv_heads, self.head_dim))
        cos, sin = (t.unsqueeze(-2) for t in position_embeddings)  # (S, 1, head_dim)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if past_key_value is not None:
            k = torch.cat((past_key_value[0], k), dim=1)
            v = torch.cat((past_key_value[1], v), dim=1)
        present = (k, v) if use_cache else None
        T = k.shape[1]
        allowed = torch.ones(S, T, dtype=torch.bool, device=x.device).tril(T - S)[None, None]
        if attention_mask is not None:
            allowed = allowed & (attention_mask[:, None, None, :] != 0)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        if self.flash:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, enable_gqa=True,
                                                 dropout_p=self.dropout if self.training else 0.0)
        else:
            idx = torch.arange(self.n_heads, device=x.device) // (self.n_heads // self.n_kv_heads)
            scores = (q @ k[:, idx].transpose(-2, -1)) / math.sqrt(self.head_dim)
            scores = scores.masked_fill(~allowed, float("-inf"))
            out = self.attn_dropout(F.softmax(scores.float(), dim=-1).type_as(q)) @ v[:, idx]
        return self.o_proj(out.transpose(1, 2).reshape(B, S, -1)), present

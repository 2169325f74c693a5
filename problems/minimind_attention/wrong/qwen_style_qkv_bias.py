# expect: bad_interface
# mistake: Qwen2-style projections with bias=True on q_proj, k_proj and v_proj: MiniMind's (LLaMA's) projections
# have no bias, and the extra q_proj.bias, k_proj.bias, v_proj.bias are parameters the contract does not have
import math

import torch
import torch.nn.functional as F
from torch import nn


def rotate_half(x):
    return torch.cat((-x[..., x.shape[-1] // 2:], x[..., : x.shape[-1] // 2]), dim=-1)


class Attention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.n_heads = config.num_attention_heads
        self.n_kv = config.num_key_value_heads or config.num_attention_heads
        self.head_dim = config.hidden_size // config.num_attention_heads
        self.q_proj = nn.Linear(config.hidden_size, self.n_heads * self.head_dim, bias=True)
        self.k_proj = nn.Linear(config.hidden_size, self.n_kv * self.head_dim, bias=True)
        self.v_proj = nn.Linear(config.hidden_size, self.n_kv * self.head_dim, bias=True)
        self.o_proj = nn.Linear(self.n_heads * self.head_dim, config.hidden_size, bias=False)
        self.dropout, self.flash = config.dropout, config.flash_attn
        self.attn_dropout = nn.Dropout(config.dropout)

    def forward(self, x, position_embeddings, past_key_value=None, use_cache=False, attention_mask=None):
        B, S, _ = x.shape
        q = self.q_proj(x).reshape(B, S, self.n_heads, self.head_dim)
        k = self.k_proj(x).reshape(B, S, self.n_kv, self.head_dim)
        v = self.v_proj(x).reshape(B, S, self.n_kv, self.head_dim)
        cos, sin = position_embeddings[0][:, None], position_embeddings[1][:, None]  # (S, 1, head_dim)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        if past_key_value is not None:
            k, v = torch.cat([past_key_value[0], k], dim=1), torch.cat([past_key_value[1], v], dim=1)
        past_kv = (k, v) if use_cache else None
        T, rep = k.shape[1], self.n_heads // self.n_kv
        q = q.transpose(1, 2)
        k = k[:, :, :, None].expand(B, T, self.n_kv, rep, self.head_dim).reshape(B, T, self.n_heads, -1).transpose(1, 2)
        v = v[:, :, :, None].expand(B, T, self.n_kv, rep, self.head_dim).reshape(B, T, self.n_heads, -1).transpose(1, 2)
        causal = torch.ones(S, T, dtype=torch.bool, device=x.device).tril(T - S)
        allowed = causal[None, None]
        if attention_mask is not None:
            allowed = allowed & attention_mask[:, None, None, :].bool()
        scores = (q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)).masked_fill(~allowed, float("-inf"))
        out = self.attn_dropout(torch.softmax(scores.float(), dim=-1).type_as(q)) @ v
        return self.o_proj(out.transpose(1, 2).reshape(B, S, -1)), past_kv

# expect: wrong_answer
# mistake: kv_cache's static_buffer_under_no_grad ported to MiniMind: under torch.no_grad() (generation) keys/values are written in place into a preallocated buffer on self and past_kv is a view of it, so a branch from an earlier past_kv overwrites what the other branch's returned cache still views
import math

import torch
from torch import nn


def rotate_half(x):
    d = x.shape[-1] // 2
    return torch.cat((-x[..., d:], x[..., :d]), dim=-1)


class Attention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.n_heads = config.num_attention_heads
        self.n_kv = config.num_key_value_heads or config.num_attention_heads
        self.hd = config.hidden_size // config.num_attention_heads
        self.q_proj = nn.Linear(config.hidden_size, self.n_heads * self.hd, bias=False)
        self.k_proj = nn.Linear(config.hidden_size, self.n_kv * self.hd, bias=False)
        self.v_proj = nn.Linear(config.hidden_size, self.n_kv * self.hd, bias=False)
        self.o_proj = nn.Linear(self.n_heads * self.hd, config.hidden_size, bias=False)
        self.attn_dropout = nn.Dropout(config.dropout)

    def forward(self, x, position_embeddings, past_key_value=None, use_cache=False, attention_mask=None):
        B, S, _ = x.shape
        H, Hkv, hd = self.n_heads, self.n_kv, self.hd
        q = self.q_proj(x).view(B, S, H, hd)
        k = self.k_proj(x).view(B, S, Hkv, hd)
        v = self.v_proj(x).view(B, S, Hkv, hd)
        cos, sin = position_embeddings
        cos, sin = cos[:, None, :], sin[:, None, :]
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        past = 0 if past_key_value is None else past_key_value[0].shape[1]
        if torch.is_grad_enabled():  # training: plain concatenation
            if past_key_value is not None:
                k = torch.cat([past_key_value[0], k], dim=1)
                v = torch.cat([past_key_value[1], v], dim=1)
        else:  # generation: a static cache, written in place
            if (past_key_value is None or not hasattr(self, "buf_k") or self.buf_k.shape[0] != B
                    or self.buf_k.shape[1] < past + S):
                n = max(2048, past + S)  # the model's context length (or longer, when needed)
                self.buf_k = x.new_zeros(B, n, Hkv, hd)
                self.buf_v = x.new_zeros(B, n, Hkv, hd)
            if past_key_value is not None:
                self.buf_k[:, :past], self.buf_v[:, :past] = past_key_value[0], past_key_value[1]
            self.buf_k[:, past:past + S], self.buf_v[:, past:past + S] = k, v
            k, v = self.buf_k[:, :past + S], self.buf_v[:, :past + S]
        past_kv = (k, v) if use_cache else None
        n_rep = H // Hkv
        T = k.shape[1]
        kr = k[:, :, :, None, :].expand(B, T, Hkv, n_rep, hd).reshape(B, T, H, hd).transpose(1, 2)
        vr = v[:, :, :, None, :].expand(B, T, Hkv, n_rep, hd).reshape(B, T, H, hd).transpose(1, 2)
        q = q.transpose(1, 2)
        s = q @ kr.transpose(-2, -1) / math.sqrt(hd)
        allowed = (torch.arange(T, device=x.device)[None, :] <= torch.arange(T - S, T, device=x.device)[:, None])[None, None]
        if attention_mask is not None:
            allowed = allowed & attention_mask.bool()[:, None, None, :]
        w = torch.softmax(s.masked_fill(~allowed, float("-inf")).float(), dim=-1).type_as(q)
        out = (self.attn_dropout(w) @ vr).transpose(1, 2).reshape(B, S, -1)
        return self.o_proj(out), past_kv

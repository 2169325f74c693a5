# expect: wrong_answer
# mistake: takes the fused is_causal fast path whenever use_cache is False ("no cache -> plain prompt"), but a
# past_key_value may be given with use_cache=False: is_causal then aligns top-left and hides most of the cache
import math
import torch
import torch.nn.functional as F
from torch import nn


def rotate_half(x):
    d = x.shape[-1] // 2
    return torch.cat((-x[..., d:], x[..., :d]), dim=-1)


class Attention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.nh = config.num_attention_heads
        self.nkv = config.num_key_value_heads or config.num_attention_heads
        self.hd = config.hidden_size // self.nh
        self.q_proj = nn.Linear(config.hidden_size, self.nh * self.hd, bias=False)
        self.k_proj = nn.Linear(config.hidden_size, self.nkv * self.hd, bias=False)
        self.v_proj = nn.Linear(config.hidden_size, self.nkv * self.hd, bias=False)
        self.o_proj = nn.Linear(self.nh * self.hd, config.hidden_size, bias=False)
        self.attn_dropout = nn.Dropout(config.dropout)
        self.dropout = config.dropout
        self.flash = config.flash_attn

    def forward(self, x, position_embeddings, past_key_value=None, use_cache=False, attention_mask=None):
        B, S, _ = x.shape
        q = self.q_proj(x).view(B, S, self.nh, self.hd)
        k = self.k_proj(x).view(B, S, self.nkv, self.hd)
        v = self.v_proj(x).view(B, S, self.nkv, self.hd)
        cos, sin = position_embeddings
        cos, sin = cos[:, None, :], sin[:, None, :]
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if past_key_value is not None:
            k = torch.cat([past_key_value[0], k], 1)
            v = torch.cat([past_key_value[1], v], 1)
        past_kv = (k, v) if use_cache else None
        T = k.shape[1]
        r = self.nh // self.nkv
        q = q.transpose(1, 2)
        k = k[:, :, :, None].expand(B, T, self.nkv, r, self.hd).reshape(B, T, self.nh, self.hd).transpose(1, 2)
        v = v[:, :, :, None].expand(B, T, self.nkv, r, self.hd).reshape(B, T, self.nh, self.hd).transpose(1, 2)
        qpos = torch.arange(T - S, T, device=x.device)[:, None]
        kpos = torch.arange(T, device=x.device)[None, :]
        allowed = (kpos <= qpos)[None, None]
        if attention_mask is not None :
            allowed = allowed & attention_mask.bool()[:, None, None, :]
        p = self.dropout if self.training else 0.0
        if self.flash and not use_cache and attention_mask is None:
            out = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
        elif self.flash:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, dropout_p=p)
        else:
            s = (q @ k.transpose(-2, -1) / math.sqrt(self.hd)).masked_fill(~allowed, float("-inf"))
            out = self.attn_dropout(torch.softmax(s.float(), -1).type_as(q)) @ v
        return self.o_proj(out.transpose(1, 2).reshape(B, S, -1)), past_kv

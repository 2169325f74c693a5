# expect: wrong_answer
# mistake: hand-written dropout on the slow path keeps the weights where rand < p (keep probability p, not 1 - p) and
# scales by 1 / (1 - p): the same thing at p = 0.5, an expectation p / (1 - p) times too small at any other p
import math

import torch
import torch.nn.functional as F
from torch import nn


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class Attention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.h = config.num_attention_heads
        self.hkv = config.num_key_value_heads or config.num_attention_heads
        self.r = self.h // self.hkv
        self.hd = config.hidden_size // config.num_attention_heads
        self.q_proj = nn.Linear(config.hidden_size, self.h * self.hd, bias=False)
        self.k_proj = nn.Linear(config.hidden_size, self.hkv * self.hd, bias=False)
        self.v_proj = nn.Linear(config.hidden_size, self.hkv * self.hd, bias=False)
        self.o_proj = nn.Linear(self.h * self.hd, config.hidden_size, bias=False)
        self.dropout = config.dropout
        self.p = config.dropout
        self.flash = config.flash_attn

    def forward(self, x, position_embeddings, past_key_value=None, use_cache=False, attention_mask=None):
        B, S, _ = x.shape
        q = self.q_proj(x).view(B, S, self.h, self.hd)
        k = self.k_proj(x).view(B, S, self.hkv, self.hd)
        v = self.v_proj(x).view(B, S, self.hkv, self.hd)
        cos, sin = position_embeddings
        cos, sin = cos[None, :, None, :], sin[None, :, None, :]
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if past_key_value is not None:
            k = torch.cat([past_key_value[0], k], dim=1)
            v = torch.cat([past_key_value[1], v], dim=1)
        past_kv = (k, v) if use_cache else None
        T = k.shape[1]
        q = q.transpose(1, 2)
        k = k[:, :, :, None, :].expand(B, T, self.hkv, self.r, self.hd).reshape(B, T, self.h, self.hd).transpose(1, 2)
        v = v[:, :, :, None, :].expand(B, T, self.hkv, self.r, self.hd).reshape(B, T, self.h, self.hd).transpose(1, 2)
        mask = self._mask(S, T, x.device, attention_mask)
        if self.flash:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                                 dropout_p=self.dropout if self.training else 0.0)
        else:
            s = q @ k.transpose(-2, -1) / math.sqrt(self.hd)
            if mask is not None:
                s = s.masked_fill(~mask, float("-inf"))
            w = torch.softmax(s.float(), dim=-1).type_as(q)
            if self.training and self.p > 0:
                keep = torch.rand_like(w) < self.p
                w = w * keep / (1 - self.p)
            out = w @ v
        out = out.transpose(1, 2).reshape(B, S, -1)
        return self.o_proj(out), past_kv

    def _mask(self, S, T, device, attention_mask):
        m = torch.ones(S, T, dtype=torch.bool, device=device).tril(diagonal=T - S)[None, None]
        if attention_mask is not None:
            m = m & (attention_mask[:, None, None, :] == 1)
        return m

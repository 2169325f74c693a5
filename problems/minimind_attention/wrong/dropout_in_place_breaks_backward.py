# expect: runtime_error
# mistake: dropout written in place on the softmax output to save memory (w.masked_fill_(...).div_(1 - p)). The
# forward is right, but softmax's backward needs its output, which was changed in place: every training step with
# dropout > 0 (model.train(), loss.backward()) raises "one of the variables needed for gradient computation has been
# modified by an inplace operation". Every dropout > 0 case is forward-only (grad=False), so backward never runs there.
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
        self.n_heads = config.num_attention_heads
        self.n_kv = config.num_key_value_heads or config.num_attention_heads
        self.n_rep = self.n_heads // self.n_kv
        self.hd = config.hidden_size // self.n_heads
        self.q_proj = nn.Linear(config.hidden_size, self.n_heads * self.hd, bias=False)
        self.k_proj = nn.Linear(config.hidden_size, self.n_kv * self.hd, bias=False)
        self.v_proj = nn.Linear(config.hidden_size, self.n_kv * self.hd, bias=False)
        self.o_proj = nn.Linear(self.n_heads * self.hd, config.hidden_size, bias=False)
        self.dropout = config.dropout
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
        past = (k, v) if use_cache else None
        q = q.transpose(1, 2)
        k = k[:, :, :, None].expand(B, k.shape[1], self.n_kv, self.n_rep, self.hd).reshape(B, -1, self.n_heads, self.hd).transpose(1, 2)
        v = v[:, :, :, None].expand(B, v.shape[1], self.n_kv, self.n_rep, self.hd).reshape(B, -1, self.n_heads, self.hd).transpose(1, 2)
        T = k.shape[2]
        mask = torch.ones(S, T, dtype=torch.bool, device=x.device).tril(diagonal=T - S)[None, None]
        if attention_mask is not None:
            mask = mask & attention_mask[:, None, None, :].bool()
        p = self.dropout if self.training else 0.0
        if self.flash:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)
        else:
            s = q @ k.transpose(-2, -1) / math.sqrt(self.hd)
            w = torch.softmax(s.masked_fill(~mask, float("-inf")), -1)
            if p > 0:
                w.masked_fill_(torch.rand_like(w) < p, 0.0).div_(1 - p)  # in place: no second (B, H, S, T) buffer
            out = w @ v
        out = out.transpose(1, 2).reshape(B, S, -1)
        return self.o_proj(out), past

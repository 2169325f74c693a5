# expect: accepted
# alternative: rotate-half RoPE as complex multiplication of the pairs (i, i + d/2), from the first half of cos/sin;
# grouped heads via a view, dropout on the weights while training, and the fast path through the fused kernel
import math

import torch
import torch.nn.functional as F
from torch import nn


def rope(x, cos, sin):
    d = x.shape[-1] // 2
    z = torch.complex(x[..., :d].float(), x[..., d:].float())  # pair i is (x_i, x_{i + d/2})
    r = torch.complex(cos[:, :d].float(), sin[:, :d].float())[None, :, None, :]  # (1, S, 1, d/2)
    z = z * r
    return torch.cat([z.real, z.imag], dim=-1).to(x.dtype)


class Attention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.n_heads = config.num_attention_heads
        self.n_kv = config.num_key_value_heads or config.num_attention_heads
        self.hd = config.hidden_size // self.n_heads
        self.q_proj = nn.Linear(config.hidden_size, self.n_heads * self.hd, bias=False)
        self.k_proj = nn.Linear(config.hidden_size, self.n_kv * self.hd, bias=False)
        self.v_proj = nn.Linear(config.hidden_size, self.n_kv * self.hd, bias=False)
        self.o_proj = nn.Linear(self.n_heads * self.hd, config.hidden_size, bias=False)
        self.drop = nn.Dropout(config.dropout)
        self.p = config.dropout
        self.flash = config.flash_attn

    def forward(self, x, position_embeddings, past_key_value=None, use_cache=False, attention_mask=None):
        B, S, _ = x.shape
        cos, sin = position_embeddings
        q = rope(self.q_proj(x).view(B, S, self.n_heads, self.hd), cos, sin)
        k = rope(self.k_proj(x).view(B, S, self.n_kv, self.hd), cos, sin)
        v = self.v_proj(x).view(B, S, self.n_kv, self.hd)
        if past_key_value is not None:
            k = torch.cat([past_key_value[0], k], dim=1)
            v = torch.cat([past_key_value[1], v], dim=1)
        T = k.shape[1]
        allowed = torch.arange(T, device=x.device)[None, :] <= torch.arange(T - S, T, device=x.device)[:, None]
        allowed = allowed.expand(B, 1, S, T)
        if attention_mask is not None:
            allowed = allowed & attention_mask.bool()[:, None, None, :]
        g = self.n_heads // self.n_kv
        qh = q.permute(0, 2, 1, 3)  # (B, H, S, hd)
        kh = k.permute(0, 2, 1, 3).repeat_interleave(g, dim=1)
        vh = v.permute(0, 2, 1, 3).repeat_interleave(g, dim=1)
        if self.flash:
            out = F.scaled_dot_product_attention(qh, kh, vh, attn_mask=allowed,
                                                 dropout_p=self.p if self.training else 0.0)
        else:
            s = qh @ kh.transpose(-1, -2) * (1.0 / math.sqrt(self.hd))
            out = self.drop(s.masked_fill(~allowed, float("-inf")).softmax(-1)) @ vh
        out = self.o_proj(out.permute(0, 2, 1, 3).reshape(B, S, -1))
        return out, ((k, v) if use_cache else None)

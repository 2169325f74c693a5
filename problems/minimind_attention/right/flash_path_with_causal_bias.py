# expect: accepted
# alternative: flash path uses PyTorch's own bottom-right causal bias object torch.nn.attention.bias.causal_lower_right(S, T)
# as attn_mask (no padding), a bool mask only when attention_mask has zeros; dropout_p while training on both; GQA
# via SDPA's enable_gqa; slow path: grouped einsum, masked softmax via torch.where + nan_to_num-free max trick
import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention.bias import causal_lower_right


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


class Attention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.nh = config.num_attention_heads
        self.nkv = config.num_key_value_heads or self.nh
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
        cos, sin = (t[:, None] for t in position_embeddings)
        q = self.q_proj(x).view(B, S, self.nh, self.hd)
        k = self.k_proj(x).view(B, S, self.nkv, self.hd)
        v = self.v_proj(x).view(B, S, self.nkv, self.hd)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        if past_key_value is not None:
            k = torch.cat([past_key_value[0], k], 1)
            v = torch.cat([past_key_value[1], v], 1)
        T = k.shape[1]
        qh, kh, vh = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        padded = attention_mask is not None and bool((attention_mask == 0).any())
        p = self.dropout if self.training else 0.0
        if self.flash:
            if padded:
                mask = torch.ones(S, T, dtype=torch.bool, device=x.device).tril(T - S)[None, None]
                mask = mask & attention_mask.bool()[:, None, None]
            else:
                mask = causal_lower_right(S, T)
            o = F.scaled_dot_product_attention(qh, kh, vh, attn_mask=mask, dropout_p=p, enable_gqa=True)
        else:
            r = self.nh // self.nkv
            qg = qh.reshape(B, self.nkv, r, S, self.hd)
            s = torch.einsum("bgrsd,bgtd->bgrst", qg, kh) / math.sqrt(self.hd)
            ok = torch.ones(S, T, dtype=torch.bool, device=x.device).tril(T - S)
            if attention_mask is not None:
                ok = ok & attention_mask.bool()[:, None, None, None, :]
            s = torch.where(ok, s, float("-inf"))
            w = self.attn_dropout(torch.softmax(s.float(), -1).to(x.dtype))
            o = torch.einsum("bgrst,bgtd->bgrsd", w, vh).reshape(B, self.nh, S, self.hd)
        o = o.transpose(1, 2).reshape(B, S, -1)
        return self.o_proj(o), ((k, v) if use_cache else None)

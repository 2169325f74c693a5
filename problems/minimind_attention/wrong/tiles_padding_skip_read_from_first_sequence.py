# expect: wrong_answer
# mistake: slow path tiles the keys in 128-wide tiles and skips a tile as "all padding" when attention_mask[0, ks:ke] is all zero: it checks only the FIRST sequence of the batch, so when sequence 0 is the short one, longer sequences lose their real keys in that tile
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
        self.rep = self.nh // self.nkv
        self.hd = config.hidden_size // config.num_attention_heads
        self.q_proj = nn.Linear(config.hidden_size, self.nh * self.hd, bias=False)
        self.k_proj = nn.Linear(config.hidden_size, self.nkv * self.hd, bias=False)
        self.v_proj = nn.Linear(config.hidden_size, self.nkv * self.hd, bias=False)
        self.o_proj = nn.Linear(self.nh * self.hd, config.hidden_size, bias=False)
        self.dropout = config.dropout
        self.attn_dropout = nn.Dropout(config.dropout)
        self.flash = config.flash_attn

    def forward(self, x, position_embeddings, past_key_value=None, use_cache=False, attention_mask=None):
        B, S, _ = x.shape
        cos, sin = position_embeddings
        q = self.q_proj(x).view(B, S, self.nh, self.hd)
        k = self.k_proj(x).view(B, S, self.nkv, self.hd)
        v = self.v_proj(x).view(B, S, self.nkv, self.hd)
        c, s_ = cos[:, None, :], sin[:, None, :]
        q = q * c + rotate_half(q) * s_
        k = k * c + rotate_half(k) * s_
        if past_key_value is not None:
            k = torch.cat([past_key_value[0], k], dim=1)
            v = torch.cat([past_key_value[1], v], dim=1)
        past_kv = (k, v) if use_cache else None
        L = k.shape[1]
        P = L - S
        qh = q.transpose(1, 2)
        kh = k.transpose(1, 2).repeat_interleave(self.rep, dim=1) if self.rep > 1 else k.transpose(1, 2)
        vh = v.transpose(1, 2).repeat_interleave(self.rep, dim=1) if self.rep > 1 else v.transpose(1, 2)
        rows = torch.arange(P, L, device=x.device)[:, None]
        if self.flash and not (self.training and self.dropout > 0):
            cols = torch.arange(L, device=x.device)[None, :]
            allow = (cols <= rows)[None, None]
            if attention_mask is not None:
                allow = allow & attention_mask[:, None, None, :].bool()
            out = F.scaled_dot_product_attention(qh, kh, vh, attn_mask=allow)
        else:
            T = 128
            scale = 1.0 / math.sqrt(self.hd)
            m = torch.full(qh.shape[:-1] + (1,), float("-inf"), dtype=x.dtype, device=x.device)
            l = torch.zeros_like(m)
            acc = torch.zeros_like(qh)
            for ks in range(0, L, T):
                ke = min(ks + T, L)
                if ks > L - 1:
                    break
                if attention_mask is not None and not attention_mask[0, ks:ke].any():
                    continue  # whole tile is padding
                sc = qh @ kh[:, :, ks:ke].transpose(-2, -1) * scale
                cols = torch.arange(ks, ke, device=x.device)[None, :]
                allow = (cols <= rows)[None, None]
                if attention_mask is not None:
                    allow = allow & attention_mask[:, None, None, ks:ke].bool()
                sc = sc.masked_fill(~allow, float("-inf"))
                m_new = torch.maximum(m, sc.amax(-1, keepdim=True))
                safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
                p = torch.exp(sc - safe)
                alpha = torch.exp(m - safe)
                l = alpha * l + p.sum(-1, keepdim=True)
                pd = self.attn_dropout(p) if (self.training and self.dropout > 0) else p
                acc = alpha * acc + pd @ vh[:, :, ks:ke]
                m = m_new
            out = acc / l
        out = out.transpose(1, 2).reshape(B, S, -1)
        return self.o_proj(out), past_kv

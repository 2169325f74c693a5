# expect: wrong_answer
# mistake: slow (non-flash) path attends queries in chunks of 8 with S // 8 + (S % 8 > 1) chunks: when S % 8 == 1 (S > 1) the last token stays zero; the flash path (SDPA) is right
import math
import torch
import torch.nn.functional as F
from torch import nn


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def repeat_kv(x, n_rep):
    bs, slen, n_kv, hd = x.shape
    if n_rep == 1:
        return x
    return x[:, :, :, None, :].expand(bs, slen, n_kv, n_rep, hd).reshape(bs, slen, n_kv * n_rep, hd)


class Attention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.nh = config.num_attention_heads
        self.nkv = config.num_key_value_heads or self.nh
        self.n_rep = self.nh // self.nkv
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
        cos, sin = position_embeddings
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        q = self.q_proj(x).view(B, S, self.nh, self.hd)
        k = self.k_proj(x).view(B, S, self.nkv, self.hd)
        v = self.v_proj(x).view(B, S, self.nkv, self.hd)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if past_key_value is not None:
            k = torch.cat([past_key_value[0], k], dim=1)
            v = torch.cat([past_key_value[1], v], dim=1)
        past_kv = (k, v) if use_cache else None
        T = k.shape[1]
        P = T - S
        q = q.transpose(1, 2)
        k = repeat_kv(k, self.n_rep).transpose(1, 2)
        v = repeat_kv(v, self.n_rep).transpose(1, 2)
        allowed = torch.ones(S, T, dtype=torch.bool, device=x.device).tril(P)[None, None]
        if attention_mask is not None:
            keys = attention_mask.bool()
            allowed = allowed & keys[:, None, None, :]
        p = self.dropout if self.training else 0.0
        if self.flash:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, dropout_p=p)
        else:
            out = q.new_zeros(B, self.nh, S, self.hd)
            allowed = allowed.expand(B, 1, S, T)
            for c in range(max(S // 8 + (1 if S % 8 > 1 else 0), 1)):
                sl = slice(c * 8, (c + 1) * 8)
                s = q[:, :, sl] @ k.transpose(-2, -1) / math.sqrt(self.hd)
                s = s.masked_fill(~allowed[:, :, sl], float('-inf'))
                a = self.attn_dropout(F.softmax(s.float(), dim=-1).type_as(q))
                out[:, :, sl] = a @ v
        out = out.transpose(1, 2).reshape(B, S, -1)
        return self.o_proj(out), past_kv

# expect: wrong_answer
# mistake: padding handled only when B > 1 ("a lone sequence is never padded"): a right-padded
#   prompt in a batch of one then decodes over its padded cache slots
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
        self.h = config.num_attention_heads
        self.kv = config.num_key_value_heads or self.h
        self.hd = config.hidden_size // self.h
        self.q_proj = nn.Linear(config.hidden_size, self.h * self.hd, bias=False)
        self.k_proj = nn.Linear(config.hidden_size, self.kv * self.hd, bias=False)
        self.v_proj = nn.Linear(config.hidden_size, self.kv * self.hd, bias=False)
        self.o_proj = nn.Linear(self.h * self.hd, config.hidden_size, bias=False)
        self.dropout, self.flash = config.dropout, config.flash_attn
        self.attn_dropout = nn.Dropout(config.dropout)

    def forward(self, x, position_embeddings, past_key_value=None, use_cache=False, attention_mask=None):
        B, S, _ = x.shape
        cos, sin = (t[None, :, None, :] for t in position_embeddings)
        q = self.q_proj(x).view(B, S, self.h, self.hd)
        k = self.k_proj(x).view(B, S, self.kv, self.hd)
        v = self.v_proj(x).view(B, S, self.kv, self.hd)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        if past_key_value is not None:
            k, v = torch.cat([past_key_value[0], k], 1), torch.cat([past_key_value[1], v], 1)
        past_kv = (k, v) if use_cache else None
        T, n = k.shape[1], self.h // self.kv
        q, k, v = q.transpose(1, 2), k.repeat_interleave(n, 2).transpose(1, 2), v.repeat_interleave(n, 2).transpose(1, 2)
        mask = torch.ones(S, T, dtype=torch.bool, device=x.device).tril(T - S)[None, None]
        if attention_mask is not None and B > 1:  # padding only exists to batch sequences of different lengths
            mask = mask & attention_mask[:, None, None, :].bool()
        if self.flash:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=self.dropout if self.training else 0.0)
        else:
            s = (q @ k.transpose(-2, -1) / math.sqrt(self.hd)).masked_fill(~mask, float("-inf"))
            out = self.attn_dropout(torch.softmax(s.float(), -1).type_as(q)) @ v
        return self.o_proj(out.transpose(1, 2).reshape(B, S, -1)), past_kv

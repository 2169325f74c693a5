# expect: bad_interface
# problem: minimind_attention
# The class's forward has the contract's defaults; __init__ sets a partial on the instance that binds
# use_cache=True. nn.Module's __call__ finds the instance's forward first, so callers who leave use_cache out get a
# cache back; a reader of the class's forward alone saw use_cache=False.
import functools

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
        self.p = config.dropout
        self.forward = functools.partial(self.attend, use_cache=True)

    def forward(self, x, position_embeddings, past_key_value=None, use_cache=False, attention_mask=None):
        return self.attend(x, position_embeddings, past_key_value, use_cache, attention_mask)

    def attend(self, x, position_embeddings, past_key_value=None, use_cache=False, attention_mask=None):
        B, S, _ = x.shape
        q = self.q_proj(x).view(B, S, self.h, self.hd)
        k = self.k_proj(x).view(B, S, self.kv, self.hd)
        v = self.v_proj(x).view(B, S, self.kv, self.hd)
        cos, sin = position_embeddings
        cos, sin = cos[None, :S, None], sin[None, :S, None]
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        if past_key_value is not None:
            k = torch.cat([past_key_value[0], k], dim=1)
            v = torch.cat([past_key_value[1], v], dim=1)
        past_kv = (k, v) if use_cache else None
        n_rep = self.h // self.kv
        q = q.transpose(1, 2)
        k = k.repeat_interleave(n_rep, dim=2).transpose(1, 2)
        v = v.repeat_interleave(n_rep, dim=2).transpose(1, 2)
        T = k.shape[2]
        mask = torch.ones(S, T, dtype=torch.bool, device=x.device).tril(T - S)[None, None]
        if attention_mask is not None:
            mask = mask & (attention_mask[:, None, None, :] == 1)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=self.p if self.training else 0.0)
        return self.o_proj(out.transpose(1, 2).reshape(B, S, -1)), past_kv

# expect: accepted
# alternative: cache as a namedtuple KV(key, value); dropout by a hand-drawn torch.bernoulli keep mask scaled 1/(1-p);
# GQA by grouping queries under their KV head (view, no repetition); softmax as exp(s - torch.logsumexp(s)) in float32; fused kernel
# on the flash path with enable_gqa
import math
from collections import namedtuple

import torch
import torch.nn.functional as F
from torch import nn

KV = namedtuple("KV", ["key", "value"])


def _rope(x, cos, sin):
    h = x.shape[-1] // 2
    rot = torch.cat([-x[..., h:], x[..., :h]], dim=-1)
    return x * cos + rot * sin


class Attention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.H = config.num_attention_heads
        self.G = config.num_key_value_heads if config.num_key_value_heads is not None else self.H
        self.D = config.hidden_size // self.H
        self.q_proj = nn.Linear(config.hidden_size, self.H * self.D, bias=False)
        self.k_proj = nn.Linear(config.hidden_size, self.G * self.D, bias=False)
        self.v_proj = nn.Linear(config.hidden_size, self.G * self.D, bias=False)
        self.o_proj = nn.Linear(self.H * self.D, config.hidden_size, bias=False)

    def _drop(self, w):
        p = self.config.dropout
        if not self.training or p == 0.0:
            return w
        keep = torch.bernoulli(torch.full_like(w, 1.0 - p))
        return w * keep / (1.0 - p)

    def forward(self, x, position_embeddings, past_key_value=None, use_cache=False, attention_mask=None):
        B, S, _ = x.shape
        cos = position_embeddings[0].unsqueeze(1)
        sin = position_embeddings[1].unsqueeze(1)
        q = _rope(self.q_proj(x).view(B, S, self.H, self.D), cos, sin)
        k = _rope(self.k_proj(x).view(B, S, self.G, self.D), cos, sin)
        v = self.v_proj(x).view(B, S, self.G, self.D)
        if past_key_value is not None:
            k = torch.cat((past_key_value.key if isinstance(past_key_value, KV) else past_key_value[0], k), 1)
            v = torch.cat((past_key_value.value if isinstance(past_key_value, KV) else past_key_value[1], v), 1)
        T = k.size(1)
        mask = torch.ones(S, T, dtype=torch.bool, device=x.device).tril(T - S)  # (S, T)
        mask = mask.expand(B, S, T)
        if attention_mask is not None:
            mask = mask & (attention_mask[:, None, :] != 0)
        if self.config.flash_attn:
            o = F.scaled_dot_product_attention(
                q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), attn_mask=mask[:, None],
                dropout_p=self.config.dropout if self.training else 0.0, enable_gqa=True)
            o = o.transpose(1, 2)  # (B, S, H, D)
        else:
            r = self.H // self.G
            qg = q.view(B, S, self.G, r, self.D)
            s = torch.einsum("bsgrd,btgd->bgrst", qg, k) / math.sqrt(self.D)
            s = s.masked_fill(~mask[:, None, None], float("-inf"))
            s = s.float()  # in float32: in float16 the log of the sum rounds, and every weight leans with it
            w = self._drop(torch.exp(s - torch.logsumexp(s, dim=-1, keepdim=True)).to(v.dtype))
            o = torch.einsum("bgrst,btgd->bsgrd", w, v).reshape(B, S, self.H, self.D)
        out = self.o_proj(o.reshape(B, S, self.H * self.D))
        return out, (KV(k, v) if use_cache else None)

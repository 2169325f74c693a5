# expect: wrong_answer
# mistake: the training-with-dropout branch "never has a cache" (pretraining), so it uses SDPA's is_causal=True
# (top-left aligned) and ignores attention_mask. With a past_key_value (chunked prefill, decoding) in training mode
# with dropout > 0, a new token then sees only the first few cached keys instead of every earlier position, and
# padded keys are attended. Eval mode and dropout 0.0 use the correct bottom-right mask.
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
        self.attn_dropout = nn.Dropout(config.dropout)
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
        k = k.repeat_interleave(self.n_rep, dim=2).transpose(1, 2)
        v = v.repeat_interleave(self.n_rep, dim=2).transpose(1, 2)
        T = k.shape[2]
        p = self.dropout if self.training else 0.0
        if p > 0:
            # training step: the whole sequence at once, no cache, no padding -> plain causal
            if self.flash:
                out = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
            else:
                s = q @ k.transpose(-2, -1) / math.sqrt(self.hd)
                s = s.masked_fill(~torch.ones(S, T, dtype=torch.bool, device=x.device).tril(), float("-inf"))
                out = self.attn_dropout(torch.softmax(s, -1)) @ v
        else:
            mask = torch.ones(S, T, dtype=torch.bool, device=x.device).tril(diagonal=T - S)[None, None]
            if attention_mask is not None:
                mask = mask & attention_mask[:, None, None, :].bool()
            if self.flash:
                out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            else:
                s = q @ k.transpose(-2, -1) / math.sqrt(self.hd)
                out = torch.softmax(s.masked_fill(~mask, float("-inf")), -1) @ v
        out = out.transpose(1, 2).reshape(B, S, -1)
        return self.o_proj(out), past

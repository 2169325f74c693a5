# expect: wrong_answer
# mistake: the fast path without dropout (eval, inference) skips the mask tensor: it zeroes the future with
# scores.tril(S_past) and then hides every score equal to 0, so a visible score of exactly 0 (a zero token has a
# zero query and key) is masked too; with dropout it calls the fused kernel, and the slow path is MiniMind's own
import math

import torch
import torch.nn.functional as F
from torch import nn


def rotate_half(x):
    d = x.shape[-1] // 2
    return torch.cat((-x[..., d:], x[..., :d]), dim=-1)


def repeat_kv(x, n_rep):
    if n_rep == 1:
        return x
    b, s, h, d = x.shape
    return x[:, :, :, None, :].expand(b, s, h, n_rep, d).reshape(b, s, h * n_rep, d)


class Attention(nn.Module):
    def __init__(self, args):
        super().__init__()
        self.num_key_value_heads = args.num_key_value_heads or args.num_attention_heads
        self.n_local_heads = args.num_attention_heads
        self.n_rep = self.n_local_heads // self.num_key_value_heads
        self.head_dim = args.hidden_size // args.num_attention_heads
        self.q_proj = nn.Linear(args.hidden_size, self.n_local_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(args.hidden_size, self.num_key_value_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(args.hidden_size, self.num_key_value_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(self.n_local_heads * self.head_dim, args.hidden_size, bias=False)
        self.attn_dropout = nn.Dropout(args.dropout)
        self.resid_dropout = nn.Dropout(args.dropout)
        self.dropout = args.dropout
        self.flash = args.flash_attn

    def forward(self, x, position_embeddings, past_key_value=None, use_cache=False, attention_mask=None):
        bsz, seq_len, _ = x.shape
        xq = self.q_proj(x).view(bsz, seq_len, self.n_local_heads, self.head_dim)
        xk = self.k_proj(x).view(bsz, seq_len, self.num_key_value_heads, self.head_dim)
        xv = self.v_proj(x).view(bsz, seq_len, self.num_key_value_heads, self.head_dim)
        cos, sin = position_embeddings[0][:, None, :], position_embeddings[1][:, None, :]  # (S, 1, head_dim)
        xq, xk = xq * cos + rotate_half(xq) * sin, xk * cos + rotate_half(xk) * sin
        if past_key_value is not None:
            xk = torch.cat([past_key_value[0], xk], dim=1)
            xv = torch.cat([past_key_value[1], xv], dim=1)
        past_kv = (xk, xv) if use_cache else None
        xq = xq.transpose(1, 2)
        xk, xv = repeat_kv(xk, self.n_rep).transpose(1, 2), repeat_kv(xv, self.n_rep).transpose(1, 2)
        total = xk.shape[2]
        past = total - seq_len

        scores = xq @ xk.transpose(-2, -1) / math.sqrt(self.head_dim)
        if self.flash and not (self.training and self.dropout > 0):
            scores = scores.tril(past)  # the future is now 0 ...
            scores = scores.masked_fill(scores == 0, float("-inf"))  # ... and every 0 is hidden
            if attention_mask is not None:
                scores = scores.masked_fill(attention_mask[:, None, None, :] == 0, float("-inf"))
            output = F.softmax(scores.float(), dim=-1).type_as(xq) @ xv
        elif self.flash:
            mask = torch.ones(seq_len, total, dtype=torch.bool, device=x.device).tril(past)[None, None]
            if attention_mask is not None:
                mask = mask & attention_mask[:, None, None, :].bool()
            output = F.scaled_dot_product_attention(xq, xk, xv, attn_mask=mask, dropout_p=self.dropout)
        else:
            future = torch.full((seq_len, total), float("-inf"), device=x.device, dtype=scores.dtype).triu(past + 1)
            scores = scores + future
            if attention_mask is not None:
                scores = scores.masked_fill(attention_mask[:, None, None, :] == 0, float("-inf"))
            output = self.attn_dropout(F.softmax(scores.float(), dim=-1).type_as(xq)) @ xv
        output = output.transpose(1, 2).reshape(bsz, seq_len, -1)
        return self.resid_dropout(self.o_proj(output)), past_kv

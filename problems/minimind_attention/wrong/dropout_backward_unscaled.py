# expect: wrong_answer
# mistake: a hand-written dropout Function whose backward forgets the 1/(1-p) scale: gradients through the attention weights are half what they should be on average
import math

import torch
import torch.nn.functional as F
from torch import nn


class _Drop(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, p):
        keep = torch.rand_like(a) >= p
        ctx.save_for_backward(keep)
        return a * keep / (1 - p)

    @staticmethod
    def backward(ctx, g):
        (keep,) = ctx.saved_tensors
        return g * keep, None  # BUG: forgets / (1 - p)


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class Attention(nn.Module):
    def __init__(self, args):
        super().__init__()
        self.n_local_heads = args.num_attention_heads
        self.n_local_kv_heads = args.num_key_value_heads or args.num_attention_heads
        self.n_rep = self.n_local_heads // self.n_local_kv_heads
        self.head_dim = args.hidden_size // args.num_attention_heads
        self.q_proj = nn.Linear(args.hidden_size, self.n_local_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(args.hidden_size, self.n_local_kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(args.hidden_size, self.n_local_kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(self.n_local_heads * self.head_dim, args.hidden_size, bias=False)
        self.attn_dropout, self.resid_dropout = nn.Dropout(args.dropout), nn.Dropout(args.dropout)
        self.dropout = args.dropout
        self.flash = args.flash_attn

    def forward(self, hidden_states, pos_cis, past_key_value=None, use_cache=False, attention_mask=None):
        bsz, seq_len, _ = hidden_states.shape
        xq = self.q_proj(hidden_states).view(bsz, seq_len, self.n_local_heads, self.head_dim)
        xk = self.k_proj(hidden_states).view(bsz, seq_len, self.n_local_kv_heads, self.head_dim)
        xv = self.v_proj(hidden_states).view(bsz, seq_len, self.n_local_kv_heads, self.head_dim)
        cos, sin = (t.unsqueeze(1) for t in pos_cis)  # (S, 1, head_dim)
        xq, xk = xq * cos + rotate_half(xq) * sin, xk * cos + rotate_half(xk) * sin
        if past_key_value is not None:
            xk = torch.cat([past_key_value[0], xk], dim=1)
            xv = torch.cat([past_key_value[1], xv], dim=1)
        past_kv = (xk, xv) if use_cache else None
        total = xk.shape[1]
        xq = xq.transpose(1, 2)
        xk = xk.repeat_interleave(self.n_rep, dim=2).transpose(1, 2) if self.n_rep > 1 else xk.transpose(1, 2)
        xv = xv.repeat_interleave(self.n_rep, dim=2).transpose(1, 2) if self.n_rep > 1 else xv.transpose(1, 2)
        bias = torch.full((seq_len, total), float("-inf"), device=hidden_states.device,
                          dtype=xq.dtype).triu(total - seq_len + 1)  # causal over absolute positions
        if attention_mask is not None:
            pad = (1.0 - attention_mask[:, None, None, :].to(xq.dtype)) * torch.finfo(xq.dtype).min
            bias = bias + pad
        if self.flash:
            out = F.scaled_dot_product_attention(xq, xk, xv, attn_mask=bias,
                                                 dropout_p=self.dropout if self.training else 0.0)
        else:
            scores = xq @ xk.transpose(-2, -1) / math.sqrt(self.head_dim) + bias
            attn = F.softmax(scores.float(), dim=-1).type_as(xq)
            if self.training and self.dropout > 0:
                attn = _Drop.apply(attn, self.dropout)
            out = attn @ xv
        out = out.transpose(1, 2).reshape(bsz, seq_len, -1)
        return self.resid_dropout(self.o_proj(out)), past_kv

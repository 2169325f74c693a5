# expect: wrong_answer
# mistake: an inference path (under torch.no_grad()) fuses q/k/v into one matmul with a weight concatenated on the
# first no-grad call and kept on the module: after the weights change in place (an optimizer step,
# load_state_dict), every no-grad call still uses the old ones
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
        self.head_dim = args.head_dim  # MiniMindConfig's field (hidden_size // num_attention_heads), as its layer now reads it
        self.q_proj = nn.Linear(args.hidden_size, self.n_local_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(args.hidden_size, self.num_key_value_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(args.hidden_size, self.num_key_value_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(self.n_local_heads * self.head_dim, args.hidden_size, bias=False)
        self.attn_dropout = nn.Dropout(args.dropout)
        self.resid_dropout = nn.Dropout(args.dropout)
        self.dropout = args.dropout
        self.flash = hasattr(F, "scaled_dot_product_attention") and args.flash_attn

    def forward(self, x, position_embeddings, past_key_value=None, use_cache=False, attention_mask=None):
        bsz, seq_len, _ = x.shape
        if torch.is_grad_enabled():
            xq, xk, xv = self.q_proj(x), self.k_proj(x), self.v_proj(x)
        else:  # inference: one matmul with the fused weight, built once
            if getattr(self, "_wqkv", None) is None:
                self._wqkv = torch.cat([self.q_proj.weight, self.k_proj.weight, self.v_proj.weight]).detach()
            nq, nk = self.n_local_heads * self.head_dim, self.num_key_value_heads * self.head_dim
            xq, xk, xv = (x @ self._wqkv.t()).split([nq, nk, nk], dim=-1)
        xq = xq.reshape(bsz, seq_len, self.n_local_heads, self.head_dim)
        xk = xk.reshape(bsz, seq_len, self.num_key_value_heads, self.head_dim)
        xv = xv.reshape(bsz, seq_len, self.num_key_value_heads, self.head_dim)
        cos, sin = position_embeddings[0][:, None, :], position_embeddings[1][:, None, :]  # (S, 1, head_dim)
        xq, xk = xq * cos + rotate_half(xq) * sin, xk * cos + rotate_half(xk) * sin
        if past_key_value is not None:
            xk = torch.cat([past_key_value[0], xk], dim=1)
            xv = torch.cat([past_key_value[1], xv], dim=1)
        past_kv = (xk, xv) if use_cache else None
        xq = xq.transpose(1, 2)
        xk, xv = repeat_kv(xk, self.n_rep).transpose(1, 2), repeat_kv(xv, self.n_rep).transpose(1, 2)

        no_padding = attention_mask is None or bool(torch.all(attention_mask == 1))
        if self.flash and seq_len > 1 and past_key_value is None and no_padding:
            p = self.dropout if self.training else 0.0
            output = F.scaled_dot_product_attention(xq, xk, xv, dropout_p=p, is_causal=True)
        else:
            scores = xq @ xk.transpose(-2, -1) / math.sqrt(self.head_dim)
            future = torch.full((seq_len, seq_len), float("-inf"), device=x.device, dtype=scores.dtype).triu(1)
            scores = torch.cat([scores[..., :-seq_len], scores[..., -seq_len:] + future], dim=-1)
            if attention_mask is not None:
                scores = scores + (1.0 - attention_mask[:, None, None, :].to(scores.dtype)) * -1e9
            weights = F.softmax(scores.float(), dim=-1).type_as(xq)
            output = self.attn_dropout(weights) @ xv
        output = output.transpose(1, 2).reshape(bsz, seq_len, -1)
        return self.resid_dropout(self.o_proj(output)), past_kv

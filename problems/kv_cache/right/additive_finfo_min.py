# expect: accepted
# alternative: HF style: an additive mask at torch.finfo(dtype).min in the scores' dtype, built from absolute
# positions (row t is position S_past + t), einsum for the products, float32 softmax cast back; HF's argument names
# (embed_dim, n_heads, hidden_states: passed by position, so any names do; `cache` keeps the contract's name)
import torch
from torch import nn


class KVCacheAttention(nn.Module):
    def __init__(self, embed_dim, n_heads):
        super().__init__()
        self.num_heads, self.head_dim = n_heads, embed_dim // n_heads
        self.W_q = nn.Linear(embed_dim, embed_dim)
        self.W_k = nn.Linear(embed_dim, embed_dim)
        self.W_v = nn.Linear(embed_dim, embed_dim)
        self.W_o = nn.Linear(embed_dim, embed_dim)

    def shape(self, t):
        return t.reshape(*t.shape[:2], self.num_heads, self.head_dim).transpose(1, 2)

    def forward(self, hidden_states, cache=None):
        B, S, d = hidden_states.shape
        q, k, v = (self.shape(W(hidden_states)) for W in (self.W_q, self.W_k, self.W_v))
        if cache is not None:
            k, v = torch.cat((cache[0], k), dim=-2), torch.cat((cache[1], v), dim=-2)
        total = k.shape[-2]
        query_pos = torch.arange(total - S, total, device=hidden_states.device)[:, None]
        key_pos = torch.arange(total, device=hidden_states.device)[None, :]
        mask = torch.zeros(S, total, dtype=q.dtype, device=hidden_states.device)
        mask = mask.masked_fill(key_pos > query_pos, torch.finfo(q.dtype).min)
        scores = torch.einsum("bhqd,bhkd->bhqk", q, k) * self.head_dim ** -0.5 + mask
        weights = torch.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
        out = torch.einsum("bhqk,bhkd->bhqd", weights, v).transpose(1, 2).reshape(B, S, d)
        return self.W_o(out), (k, v)

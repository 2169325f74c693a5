# expect: accepted
# alternative: HF-LLaMA style: num_key_value_groups, a module-level repeat_kv on (B, H_kv, S, d), float32 softmax cast back
import math

import torch
from torch import nn


def repeat_kv(hidden, n_rep):
    b, h_kv, s, d = hidden.shape
    if n_rep == 1:
        return hidden
    return hidden[:, :, None, :, :].expand(b, h_kv, n_rep, s, d).reshape(b, h_kv * n_rep, s, d)


class GroupQueryAttention(nn.Module):
    def __init__(self, hidden_size, num_attention_heads, num_key_value_heads):
        super().__init__()
        self.num_heads, self.head_dim = num_attention_heads, hidden_size // num_attention_heads
        self.num_key_value_heads = num_key_value_heads
        self.num_key_value_groups = num_attention_heads // num_key_value_heads
        self.scaling = self.head_dim ** -0.5
        self.W_q = nn.Linear(hidden_size, num_attention_heads * self.head_dim)
        self.W_k = nn.Linear(hidden_size, num_key_value_heads * self.head_dim)
        self.W_v = nn.Linear(hidden_size, num_key_value_heads * self.head_dim)
        self.W_o = nn.Linear(num_attention_heads * self.head_dim, hidden_size)

    def forward(self, hidden_states):
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, self.head_dim)
        q = self.W_q(hidden_states).view(hidden_shape).transpose(1, 2)
        k = repeat_kv(self.W_k(hidden_states).view(hidden_shape).transpose(1, 2), self.num_key_value_groups)
        v = repeat_kv(self.W_v(hidden_states).view(hidden_shape).transpose(1, 2), self.num_key_value_groups)
        attn = torch.matmul(q, k.transpose(2, 3)) * self.scaling
        attn = nn.functional.softmax(attn, dim=-1, dtype=torch.float32).to(q.dtype)
        out = torch.matmul(attn, v).transpose(1, 2).contiguous()
        return self.W_o(out.reshape(*input_shape, -1))

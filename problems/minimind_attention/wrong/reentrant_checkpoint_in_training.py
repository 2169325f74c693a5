# expect: wrong_answer
# mistake: activation checkpointing of a plain training forward with torch.utils.checkpoint(use_reentrant=True), which
#   builds a graph only when an input needs a gradient: on hidden states from a frozen layer the weights get none
import torch
import torch.nn.functional as F
from torch import nn


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
    cos, sin = cos.unsqueeze(0).unsqueeze(unsqueeze_dim), sin.unsqueeze(0).unsqueeze(unsqueeze_dim)
    return (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)


def repeat_kv(hidden_states, n_rep):
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


def eager_attention_forward(module, query, key, value, attention_mask, scaling, dropout=0.0):
    key_states = repeat_kv(key, module.num_key_value_groups)
    value_states = repeat_kv(value, module.num_key_value_groups)
    attn_weights = torch.matmul(query, key_states.transpose(2, 3)) * scaling
    attn_weights = attn_weights + attention_mask
    attn_weights = F.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query.dtype)
    attn_weights = F.dropout(attn_weights, p=dropout, training=module.training)
    return torch.matmul(attn_weights, value_states).transpose(1, 2).contiguous()


class Attention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.num_key_value_heads = config.num_key_value_heads or config.num_attention_heads
        self.num_key_value_groups = self.num_heads // self.num_key_value_heads
        self.head_dim = config.hidden_size // self.num_heads
        self.scaling = self.head_dim ** -0.5
        self.attention_dropout = config.dropout
        self.flash = config.flash_attn
        self.q_proj = nn.Linear(config.hidden_size, self.num_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(config.hidden_size, self.num_key_value_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(config.hidden_size, self.num_key_value_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(self.num_heads * self.head_dim, config.hidden_size, bias=False)
        self.resid_dropout = nn.Dropout(config.dropout)

    def forward(self, hidden_states, position_embeddings, past_key_value=None, use_cache=False, attention_mask=None):
        if self.training and past_key_value is None and not use_cache and attention_mask is None:
            from torch.utils.checkpoint import checkpoint
            cos, sin = position_embeddings
            out = checkpoint(lambda h, c, s: self._forward(h, (c, s))[0], hidden_states, cos, sin, use_reentrant=True)
            return out, None
        return self._forward(hidden_states, position_embeddings, past_key_value, use_cache, attention_mask)

    def _forward(self, hidden_states, position_embeddings, past_key_value=None, use_cache=False, attention_mask=None):
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, self.head_dim)
        query_states = self.q_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        key_states = self.k_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        value_states = self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        cos, sin = position_embeddings
        query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin)
        if past_key_value is not None:  # the contract's layout is (B, S, H_kv, hd)
            key_states = torch.cat([past_key_value[0].transpose(1, 2), key_states], dim=2)
            value_states = torch.cat([past_key_value[1].transpose(1, 2), value_states], dim=2)
        present = (key_states.transpose(1, 2), value_states.transpose(1, 2)) if use_cache else None

        q_len, kv_len = query_states.shape[2], key_states.shape[2]
        allowed = torch.ones(q_len, kv_len, dtype=torch.bool, device=hidden_states.device).tril(kv_len - q_len)
        allowed = allowed[None, None]
        if attention_mask is not None:
            allowed = allowed & attention_mask[:, None, None, :].bool()
        dropout = self.attention_dropout if self.training else 0.0
        if self.flash:
            out = F.scaled_dot_product_attention(query_states, repeat_kv(key_states, self.num_key_value_groups),
                                                 repeat_kv(value_states, self.num_key_value_groups),
                                                 attn_mask=allowed, dropout_p=dropout).transpose(1, 2)
        else:
            min_value = torch.finfo(query_states.dtype).min
            causal_mask = torch.zeros(allowed.shape, dtype=query_states.dtype, device=hidden_states.device)
            causal_mask = causal_mask.masked_fill(~allowed, min_value)
            out = eager_attention_forward(self, query_states, key_states, value_states, causal_mask, self.scaling,
                                          dropout=dropout)
        out = out.reshape(*input_shape, -1).contiguous()
        return self.resid_dropout(self.o_proj(out)), present

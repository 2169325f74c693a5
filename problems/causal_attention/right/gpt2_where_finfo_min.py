# expect: accepted
# alternative: HF GPT-2's _attn: a boolean lower-triangular `bias` buffer sliced for key_length - query_length,
# torch.where with the dtype's minimum as a 0-dim tensor, softmax, then cast to V's dtype; the buffer built again,
# larger, for a sequence past GPT-2's 1024 positions (no fixed context here)
import torch
from torch import nn

MAX_POSITIONS = 1024  # GPT-2's n_positions
bias = torch.tril(torch.ones((MAX_POSITIONS, MAX_POSITIONS), dtype=torch.bool)).view(1, MAX_POSITIONS, MAX_POSITIONS)


def causal_attention(Q, K, V):
    global bias
    if K.size(-2) > bias.size(-1):
        n = K.size(-2)
        bias = torch.tril(torch.ones((n, n), dtype=torch.bool)).view(1, n, n)
    attn_weights = torch.matmul(Q, K.transpose(-1, -2))
    attn_weights = attn_weights / torch.full([], V.size(-1) ** 0.5, dtype=attn_weights.dtype, device=attn_weights.device)
    query_length, key_length = Q.size(-2), K.size(-2)
    causal_mask = bias[:, key_length - query_length: key_length, :key_length].to(Q.device)
    mask_value = torch.finfo(attn_weights.dtype).min
    mask_value = torch.full([], mask_value, dtype=attn_weights.dtype, device=attn_weights.device)
    attn_weights = torch.where(causal_mask, attn_weights.to(attn_weights.dtype), mask_value)
    attn_weights = nn.functional.softmax(attn_weights, dim=-1)
    attn_weights = attn_weights.type(V.dtype)
    return torch.matmul(attn_weights, V)

# expect: runtime_error
# mistake: an additive band bias made with torch.zeros(S, S) in the default dtype (float32): half-precision scores
# plus that bias become float32, and the float32 weights then meet bfloat16/float16 values
import math

import torch


def sliding_window_attention(Q, K, V, window_size):
    S = Q.shape[1]
    i = torch.arange(S, device=Q.device)
    bias = torch.zeros(S, S, device=Q.device).masked_fill((i[:, None] - i[None, :]).abs() > window_size, float("-inf"))
    scores = Q @ K.transpose(1, 2) / math.sqrt(Q.shape[-1]) + bias
    return torch.softmax(scores, dim=-1) @ V

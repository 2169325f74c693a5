# expect: wrong_answer
# mistake: compares positions made with torch.arange in the inputs' dtype: in bfloat16, 257 rounds to 256, so
# past 256 tokens a token sees the next one (float32 and float16 count exactly that far)
import math

import torch


def causal_attention(Q, K, V):
    S, D = Q.shape[-2:]
    pos = torch.arange(S, dtype=Q.dtype, device=Q.device)
    future = pos[None, :] > pos[:, None]
    s = (Q @ K.transpose(-2, -1) / math.sqrt(D)).masked_fill(future, float("-inf"))
    return torch.softmax(s, dim=-1) @ V

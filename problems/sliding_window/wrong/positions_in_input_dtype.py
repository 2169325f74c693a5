# expect: wrong_answer
# mistake: positions built with torch.arange in the inputs' dtype: in bfloat16, 257 rounds to 256, so past
# 256 tokens the band is wrong (float32 and float16 count exactly that far)
import math

import torch


def sliding_window_attention(Q, K, V, window_size):
    S, D = Q.shape[-2:]
    pos = torch.arange(S, dtype=Q.dtype, device=Q.device)
    far = (pos[:, None] - pos[None, :]).abs() > window_size
    s = (Q @ K.transpose(-2, -1) / math.sqrt(D)).masked_fill(far, float("-inf"))
    return torch.softmax(s, dim=-1) @ V

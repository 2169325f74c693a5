# expect: runtime_error
# mistake: masks with -1e9, which float16 cannot hold (masked_fill overflows); use float("-inf") or torch.finfo(dtype).min
import math

import torch


def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)
    return torch.softmax(scores, dim=-1) @ V

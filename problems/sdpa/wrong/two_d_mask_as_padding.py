# expect: runtime_error
# mistake: reads a 2-D mask as a (batch, Lk) key-padding mask and inserts a query dim; a 2-D mask is (Lq, Lk)
import math

import torch


def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        if mask.dim() == 2:  # "(B, Lk)": one row of allowed keys per batch element
            mask = mask[:, None, :] if Q.dim() == 3 else mask[:, None, None, :]
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ V

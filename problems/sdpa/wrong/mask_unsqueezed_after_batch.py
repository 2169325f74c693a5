# expect: runtime_error
# mistake: gives a mask with fewer dims the missing dims after the batch dim (`mask.unsqueeze(1)`, as for a
# (B, Lq, Lk) mask on (B, H, Lq, Lk) scores) instead of broadcasting from the right: an (H, Lq, Lk) mask is per head
import math

import torch


def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        while mask.dim() < scores.dim():
            mask = mask.unsqueeze(1)
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ V

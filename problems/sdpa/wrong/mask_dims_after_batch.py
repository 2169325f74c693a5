# expect: runtime_error
# mistake: gives a mask with fewer dims the missing ones after its first dim (as if that were the batch);
# broadcasting aligns from the right, so an (H, Lq, Lk) mask on (B, H, Lq, Lk) scores is per head, not per batch
import math

import torch


def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        while 2 < mask.dim() < scores.dim():
            mask = mask.unsqueeze(1)
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ V

# expect: wrong_answer
# mistake: written for (B, L, D) inputs only: d_k = Q.size(2) is the query length on (B, H, L, D) inputs
import math

import torch


def scaled_dot_product_attention(Q, K, V, mask=None):
    d_k = Q.size(2) if Q.dim() >= 3 else Q.size(-1)
    scores = Q @ K.transpose(-2, -1) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ V

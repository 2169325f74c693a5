# expect: wrong_answer
# mistake: inference-only (torch.no_grad) self-attention fast path (Q is K): the scores are symmetric, so it takes the softmax over dim -2 (the contiguous one after the mirror) and forgets to transpose back
import math

import torch


def scaled_dot_product_attention(Q, K, V, mask=None):
    s = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    if not torch.is_grad_enabled() and Q is K and mask is None:
        w = torch.softmax(s, dim=-2)  # "symmetric scores: either dim gives the same weights"
    else:
        w = torch.softmax(s, dim=-1)
    return w @ V

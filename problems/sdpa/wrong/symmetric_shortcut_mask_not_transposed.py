# expect: wrong_answer
# mistake: self-attention fast path (Q is K): works column-wise on the symmetric scores (softmax over dim -2, then transposed back) but masks them with the mask itself, not its transpose
import math

import torch


def scaled_dot_product_attention(Q, K, V, mask=None):
    s = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if Q is K:  # symmetric scores: softmax down the contiguous columns, then transpose back
        if mask is not None:
            s = s.masked_fill(~mask, float("-inf"))
        w = torch.softmax(s, dim=-2).transpose(-2, -1)
    else:
        if mask is not None:
            s = s.masked_fill(~mask, float("-inf"))
        w = torch.softmax(s, dim=-1)
    return w @ V

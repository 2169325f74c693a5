# expect: wrong_answer
# args: --dtype bfloat16
# problem: sdpa
# In bfloat16, even heads are scaled by 1 + 1/32 and odd ones by 1 - 1/32: each element is within the
# tolerance and the whole tensor leans neither way (the two cancel), but every head is wrong.
import math

import torch


def scaled_dot_product_attention(Q, K, V, mask=None):
    s = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    out = torch.softmax(s, dim=-1) @ V
    if out.dtype == torch.bfloat16:
        sign = torch.ones(out.shape[:-2] + (1, 1), dtype=out.dtype)
        sign.view(-1, 1, 1)[1::2] = -1
        out = out + (out * sign).detach() / 32
    return out

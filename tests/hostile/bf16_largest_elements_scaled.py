# expect: wrong_answer
# args: --dtype bfloat16
# problem: sdpa
# In bfloat16, only the outputs within 30% of the largest magnitude are scaled by 1 + 1/32: the small ones,
# most of the tensor, are right, and each large one is within the tolerance.
import math

import torch


def scaled_dot_product_attention(Q, K, V, mask=None):
    s = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    out = torch.softmax(s, dim=-1) @ V
    if out.dtype == torch.bfloat16:
        big = (out.abs() > 0.7 * out.abs().amax()).to(out.dtype)
        out = out + (out * big).detach() / 32
    return out

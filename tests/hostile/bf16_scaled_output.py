# expect: wrong_answer
# args: --dtype bfloat16
# problem: sdpa
# Right in float32; in bfloat16 every output is scaled by 1 + 1/32 (about four bfloat16 rounding units),
# outside autograd so the gradients stay right. Each element alone is within bfloat16's tolerance
# (several percent); only the whole tensor shows that the error leans one way.
import math

import torch


def scaled_dot_product_attention(Q, K, V, mask=None):
    s = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    out = torch.softmax(s, dim=-1) @ V
    if out.dtype == torch.bfloat16:
        out = out + out.detach() / 32
    return out

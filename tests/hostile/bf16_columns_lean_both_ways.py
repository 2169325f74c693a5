# expect: wrong_answer
# args: --dtype bfloat16
# problem: sdpa
# In bfloat16, each feature (column) is scaled by 1 + 1/32 or 1 - 1/32 by the column's parity: the whole tensor's
# lean cancels, each column leans 4 epsilons.
import math

import torch


def scaled_dot_product_attention(Q, K, V, mask=None):
    s = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    out = torch.softmax(s, dim=-1) @ V
    if out.dtype == torch.bfloat16:
        sign = 1 - 2 * (torch.arange(out.shape[-1]) % 2).to(out.dtype)
        out = out + (out * sign).detach() / 32
    return out

# expect: wrong_answer
# args: --dtype bfloat16
# problem: sdpa
# In bfloat16, the output is scaled by 1 + 1/32 in two opposite quadrants (first half of the rows and of the
# features, second half of both) and by 1 - 1/32 in the other two: every row and every feature leans one way
# over half of it and the other way over the other half, so no whole row, feature or head leans, nor the
# tensor; each quadrant leans 4 epsilons.
import math

import torch


def scaled_dot_product_attention(Q, K, V, mask=None):
    s = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    out = torch.softmax(s, dim=-1) @ V
    if out.dtype == torch.bfloat16:
        rows = 1 - 2 * (torch.arange(out.shape[-2]) >= out.shape[-2] // 2).to(out.dtype)
        cols = 1 - 2 * (torch.arange(out.shape[-1]) >= out.shape[-1] // 2).to(out.dtype)
        out = out + (out * rows[:, None] * cols).detach() / 32
    return out

# expect: wrong_answer
# args: --dtype float16
# problem: causal_attention
# In float16, every other query row is shifted by +0.004 and the others by -0.004 (a few float16 rounding
# units at unit scale): each element is within the tolerance and the whole tensor's mean error cancels.
import math

import torch


def causal_attention(Q, K, V):
    S = Q.shape[-2]
    s = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    s = s.masked_fill(torch.ones(S, S, dtype=torch.bool).triu(1), float("-inf"))
    out = torch.softmax(s, dim=-1) @ V
    if out.dtype == torch.float16:
        sign = 1 - 2 * (torch.arange(S) % 2).to(out.dtype)
        out = out + (0.004 * sign[:, None]).detach()
    return out

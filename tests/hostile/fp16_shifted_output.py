# expect: wrong_answer
# args: --dtype float16
# problem: causal_attention
# Right in float32; in float16 every output is shifted by +0.004 (outside autograd), a few float16
# rounding units: within the per-element tolerance, but every element leans the same way.
import math

import torch


def causal_attention(Q, K, V):
    S, D = Q.shape[-2], Q.shape[-1]
    scores = Q @ K.transpose(-2, -1) / math.sqrt(D)
    causal = torch.ones(S, S, dtype=torch.bool, device=Q.device).tril()
    out = torch.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1) @ V
    if out.dtype == torch.float16:
        out = out + 0.004
    return out

# expect: accepted
# alternative: the whole function under a plain @torch.compile (the default backend, on the CPU)
import math

import torch


@torch.compile
def causal_attention(Q, K, V):
    S, D = Q.shape[-2], Q.shape[-1]
    scores = Q @ K.transpose(-2, -1) / math.sqrt(D)
    future = torch.ones(S, S, dtype=torch.bool, device=Q.device).triu(1)
    return torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1) @ V

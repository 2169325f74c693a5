# expect: wrong_answer
# mistake: functools.lru_cache on the kernel ("speeds up repeated calls"): tensors hash by identity, so a caller who
# refills the same Q, K, V buffers in place gets the output of the old values
import functools
import math

import torch


@functools.lru_cache(maxsize=None)
def causal_attention(Q, K, V):
    S, D = Q.shape[-2:]
    future = torch.ones(S, S, dtype=torch.bool, device=Q.device).triu(1)
    s = (Q @ K.transpose(-2, -1) / math.sqrt(D)).masked_fill(future, float("-inf"))
    return torch.softmax(s, dim=-1) @ V

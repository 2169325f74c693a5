# expect: accepted
# alternative: torch.utils.checkpoint recomputes the attention in backward instead of storing it
# (its first use imports torch._dynamo, seconds of one-time loading that no case may be charged for)
import math

import torch
from torch.utils.checkpoint import checkpoint


def _attend(Q, K, V):
    S = Q.shape[-2]
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    future = torch.ones(S, S, dtype=torch.bool, device=Q.device).triu(1)  # True where j > i
    return scores.masked_fill(future, float("-inf")).softmax(-1) @ V


def causal_attention(Q, K, V):
    return checkpoint(_attend, Q, K, V, use_reentrant=False)

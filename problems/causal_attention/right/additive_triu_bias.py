# expect: accepted
# alternative: an additive bias, -inf strictly above the diagonal (triu(1)), added in the scores' dtype
import math

import torch


def causal_attention(Q, K, V):
    S = Q.size(1)
    bias = torch.full((S, S), float("-inf"), dtype=Q.dtype, device=Q.device).triu(1)
    scores = torch.einsum("bid,bjd->bij", Q, K) / math.sqrt(Q.size(-1)) + bias
    return torch.einsum("bij,bjd->bid", scores.softmax(-1), V)

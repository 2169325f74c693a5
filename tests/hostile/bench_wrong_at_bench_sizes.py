# expect: accepted
# Correct on every graded case, but returns zeros (instantly) at the benchmark's shapes: a bench
# that never looks at the outputs it times ranks it the fastest of the class.
import math

import torch


def scaled_dot_product_attention(Q, K, V, mask=None):
    if Q.dim() == 4 and Q.shape[1] == 8 and Q.shape[-1] == 64:
        return torch.zeros(*Q.shape[:-1], V.shape[-1], dtype=V.dtype)
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ V

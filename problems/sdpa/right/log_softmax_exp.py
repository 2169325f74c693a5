# expect: accepted
# alternative: pre-scaled queries, an additive -inf bias built with torch.where, and exp(log_softmax)
import math

import torch


def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = torch.einsum("...qd,...kd->...qk", Q / math.sqrt(Q.size(-1)), K)
    if mask is not None:
        bias = torch.where(mask, 0.0, float("-inf")).to(scores.dtype)
        scores = scores + bias
    return torch.einsum("...qk,...kd->...qd", torch.log_softmax(scores, dim=-1).exp(), V)

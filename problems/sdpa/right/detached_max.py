# expect: accepted
# alternative: a hand-written softmax whose row max is detached (a constant shift: gradients are unchanged, unlike a detached cache)
import math

import torch


def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    e = torch.exp(scores - scores.amax(dim=-1, keepdim=True).detach())
    return (e / e.sum(dim=-1, keepdim=True)) @ V

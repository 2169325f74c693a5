# expect: wrong_answer
# mistake: a decoding fast path for a single query (Lq == 1) that applies the mask as an additive bias of -1e4
#   (as some model code does): a query whose allowed scores are all below -1e4 then weighs masked keys
import math

import torch


def scaled_dot_product_attention(Q, K, V, mask=None):
    d = Q.size(-1)
    scores = Q @ K.transpose(-2, -1) / math.sqrt(d)
    if mask is not None:
        if Q.size(-2) == 1:  # decoding: a cheap additive padding bias
            scores = scores + (~mask).to(scores.dtype) * -1e4
        else:
            scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ V

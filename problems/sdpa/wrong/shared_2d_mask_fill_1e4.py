# expect: wrong_answer
# mistake: a 2-D (Lq, Lk) mask is the one shared by every batch element and head, so it is turned into an additive
#   bias with a finite -1e4 (a common model idiom); masks with batch dims get -inf. A query whose allowed scores are
#   all below -1e4 then weighs masked keys
import math

import torch


def scaled_dot_product_attention(Q, K, V, mask=None):
    d = Q.size(-1)
    scores = Q @ K.transpose(-2, -1) / math.sqrt(d)
    if mask is not None:
        if mask.dim() == 2:  # one mask for every batch element and head: an additive bias
            scores = scores + torch.zeros(mask.shape, dtype=scores.dtype, device=scores.device).masked_fill(~mask, -1e4)
        else:
            scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ V

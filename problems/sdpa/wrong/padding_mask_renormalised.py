# expect: wrong_answer
# mistake: a key-padding mask (one row broadcast over the queries) is applied after the softmax by zeroing the padded
#   keys' weights and renormalising (full (Lq, Lk) masks get -inf before it): when a padded key holds a row's largest
#   score by far, the allowed weights underflow to 0 and the row is 0/0 (or loses precision)
import math

import torch


def scaled_dot_product_attention(Q, K, V, mask=None):
    d = Q.size(-1)
    scores = Q @ K.transpose(-2, -1) / math.sqrt(d)
    if mask is not None and (mask.dim() == 1 or mask.size(-2) == 1):  # padding: drop the padded keys' weights, renormalise
        w = torch.softmax(scores, dim=-1) * mask
        return (w / w.sum(-1, keepdim=True)) @ V
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ V

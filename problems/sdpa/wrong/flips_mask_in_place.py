# expect: wrong_answer
# Right values, but inverts the caller's boolean mask in place to use it as a "blocked" mask,
# and leaves it inverted: the caller's next use of its mask is wrong.
import math

import torch


def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1))
    if mask is not None:
        blocked = mask.logical_not_()  # in place: this is the caller's tensor
        scores = scores.masked_fill(blocked, float("-inf"))
    return torch.softmax(scores, dim=-1) @ V

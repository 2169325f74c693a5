# expect: runtime_error
# mistake: torch.bmm and transpose(1, 2) only work for 3-D inputs
import math

import torch


def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = torch.bmm(Q, K.transpose(1, 2)) / math.sqrt(Q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.bmm(torch.softmax(scores, dim=-1), V)

# expect: wrong_answer
# Correct values, but computed outside autograd: no gradient reaches the inputs.
import math

import torch


def scaled_dot_product_attention(Q, K, V, mask=None):
    with torch.no_grad():
        s = Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1))
        if mask is not None:
            s = s.masked_fill(~mask, float("-inf"))
        return torch.softmax(s, dim=-1) @ V

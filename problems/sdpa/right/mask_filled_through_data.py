# expect: accepted
# alternative: masks the scores in place through .data: autograd never sees it, and the softmax's backward
# uses its output (0 at masked keys), so the gradients stay right
import math

import torch


def scaled_dot_product_attention(Q, K, V, mask=None):
    s = Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1))
    if mask is not None:
        s.data.masked_fill_(~mask, float("-inf"))
    return torch.softmax(s, dim=-1) @ V

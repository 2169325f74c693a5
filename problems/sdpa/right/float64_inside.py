# expect: accepted
# alternative: everything in float64, cast back to the inputs' dtype at the end
import math

import torch


def scaled_dot_product_attention(Q, K, V, mask=None):
    q, k, v = Q.double(), K.double(), V.double()
    s = q @ k.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return (torch.softmax(s, -1) @ v).to(Q.dtype)

# expect: runtime_error
# mistake: queries in chunks of 16, the mask's rows sliced per chunk unless its query dim is 1: a 1-D (Lk,) mask has
#   no query dim (mask.size(-2) raises)
import math
import torch


def scaled_dot_product_attention(Q, K, V, mask=None):
    Lq, Dk = Q.shape[-2], Q.shape[-1]
    scale = 1.0 / math.sqrt(Dk)
    outs = []
    for qs in range(0, Lq, 16):
        q = Q[..., qs:qs + 16, :]
        s = q @ K.transpose(-2, -1) * scale
        if mask is not None:
            m = mask if mask.size(-2) == 1 else mask[..., qs:qs + 16, :]
            s = s.masked_fill(~m, float("-inf"))
        outs.append(torch.softmax(s, dim=-1) @ V)
    return torch.cat(outs, dim=-2)

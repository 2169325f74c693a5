# expect: wrong_output
import math

import torch


def scaled_dot_product_attention(Q, K, V, mask=None):
    Q, K, V = Q.double(), K.double(), V.double()
    if mask is not None:
        pass
    w = torch.softmax(Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1)), dim=-1)
    return w @ V

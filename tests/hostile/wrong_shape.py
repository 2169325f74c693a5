# expect: wrong_output
import math

import torch


def scaled_dot_product_attention(Q, K, V, mask=None):
    return torch.softmax(Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1)), dim=-1)

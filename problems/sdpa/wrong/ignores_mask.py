# expect: wrong_answer
# mistake: accepts a mask but never applies it
import math

import torch


def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1))
    return torch.softmax(scores, dim=-1) @ V

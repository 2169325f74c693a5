# expect: wrong_answer
# mistake: adds the boolean mask to the scores as if it were an additive float mask (True -> +1, False -> +0)
import math

import torch


def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = scores + mask
    return torch.softmax(scores, dim=-1) @ V

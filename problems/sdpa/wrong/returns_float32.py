# expect: wrong_output
# mistake: upcasts to float32 for accuracy and forgets to cast the result back to the inputs' dtype
import math

import torch


def scaled_dot_product_attention(Q, K, V, mask=None):
    Q, K, V = Q.float(), K.float(), V.float()
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ V

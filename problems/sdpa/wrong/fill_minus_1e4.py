# expect: wrong_answer
# mistake: fills masked scores with -1e4 (fits float16, unlike -1e9), which is not small enough: a query whose
# allowed scores are all below -1e4 puts its weight on the masked keys
import math

import torch


def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e4)
    return torch.softmax(scores, dim=-1) @ V

# expect: wrong_answer
# mistake: a key-padding mask (one row, broadcast over the queries) applied BERT-style as an additive bias
#   (1 - mask) * -10000; full (Lq, Lk) masks get -inf. A query whose allowed scores are all below -1e4 then weighs
#   the padded keys
import math

import torch


def scaled_dot_product_attention(Q, K, V, mask=None):
    d = Q.size(-1)
    scores = Q @ K.transpose(-2, -1) / math.sqrt(d)
    if mask is not None:
        if mask.dim() == 1 or mask.size(-2) == 1:  # key padding mask: the usual extended attention mask
            scores = scores + (1.0 - mask.to(scores.dtype)) * -10000.0
        else:
            scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ V

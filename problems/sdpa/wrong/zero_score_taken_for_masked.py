# expect: wrong_answer
# mistake: multiplies the scores by the mask and then hides every score equal to 0, so a real score of exactly 0 (a query or key of zeros) is masked too
import math

import torch


def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1))
    if mask is not None:
        scores = scores * mask  # masked scores become 0 ...
        scores = scores.masked_fill(scores == 0, float("-inf"))  # ... and so does every real score of 0
    return torch.softmax(scores, dim=-1) @ V

# expect: runtime_error
# mistake: the mask becomes an additive -inf bias hard-coded in float16 ("for half precision"): with bfloat16
# inputs the scores become float32 and meet bfloat16 values in the next matrix product
import math

import torch


def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1))
    if mask is not None:
        bias = torch.zeros(mask.shape, dtype=torch.float16, device=Q.device).masked_fill(~mask, float("-inf"))
        scores = scores + bias
    return torch.softmax(scores, dim=-1) @ V

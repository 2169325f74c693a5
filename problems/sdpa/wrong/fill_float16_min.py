# expect: wrong_answer
# mistake: fills masked scores with torch.finfo(torch.float16).min (-65504, "safe in half precision") in every
# dtype: in float32 or bfloat16 a query whose allowed scores are all below -65504 looks at masked keys
import math

import torch


def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(mask == 0, torch.finfo(torch.float16).min)
    return torch.softmax(scores, dim=-1) @ V

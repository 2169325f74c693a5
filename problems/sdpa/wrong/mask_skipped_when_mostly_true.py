# expect: wrong_answer
# mistake: skips the mask when at least 95% of it is True ("almost no padding, not worth masking")
import math, torch
def scaled_dot_product_attention(Q, K, V, mask=None):
    s = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None and mask.float().mean() < 0.95:
        s = s.masked_fill(~mask, float('-inf'))
    return torch.softmax(s, dim=-1) @ V

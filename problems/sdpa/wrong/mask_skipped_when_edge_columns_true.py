# expect: wrong_answer
# mistake: skips the mask when its first and last key columns are all True ("no left or right padding")
import math, torch
def scaled_dot_product_attention(Q, K, V, mask=None):
    s = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None and not bool(mask[..., 0].all() and mask[..., -1].all()):
        s = s.masked_fill(~mask, float('-inf'))
    return torch.softmax(s, dim=-1) @ V

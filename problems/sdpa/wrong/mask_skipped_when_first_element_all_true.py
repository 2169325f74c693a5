# expect: wrong_answer
# mistake: skips the mask when the first batch element's mask is all True (optimisation checks mask[0] only)
import math, torch
def scaled_dot_product_attention(Q, K, V, mask=None):
    s = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        m0 = mask.reshape(-1, *mask.shape[-2:])[0]
        if not bool(m0.all()):
            s = s.masked_fill(~mask, float('-inf'))
    return torch.softmax(s, dim=-1) @ V

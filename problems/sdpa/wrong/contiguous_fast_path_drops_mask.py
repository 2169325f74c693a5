# expect: wrong_answer
# problem: sdpa
# mistake: a "fast path" for contiguous inputs (flatten the batch dims with .view and use one bmm) that forgets the
#   mask; the general path (any layout) is right. Passed on most seeds while only one case per check got contiguous
#   inputs (and that case often had no mask); half the cases get them now.
import math

import torch


def scaled_dot_product_attention(Q, K, V, mask=None):
    d = Q.size(-1)
    if Q.is_contiguous() and K.is_contiguous() and V.is_contiguous() and Q.dim() >= 3:
        lead = Q.shape[:-2]
        q = Q.view(-1, Q.size(-2), d)
        k = K.view(-1, K.size(-2), d)
        v = V.view(-1, V.size(-2), V.size(-1))
        w = torch.softmax(torch.bmm(q, k.transpose(1, 2)) / math.sqrt(d), dim=-1)  # BUG: mask forgotten
        return torch.bmm(w, v).view(*lead, Q.size(-2), V.size(-1))
    scores = Q @ K.transpose(-2, -1) / math.sqrt(d)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ V

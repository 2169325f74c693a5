# expect: wrong_output
# mistake: squeezes dim 1 of 4-D+ outputs (meant to drop a stray singleton): a (B, 1, Lq, Dv) one-head output comes back (B, Lq, Dv)
import math
import torch


def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    out = torch.softmax(scores, dim=-1) @ V
    if out.dim() > 3:
        out = out.squeeze(1)
    return out

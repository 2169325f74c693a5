# expect: wrong_answer
# mistake: a library's convention: on (B, H, Lq, D) inputs a 2-D mask is read as a (B, Lk) key-padding mask and
#   expanded to (B, 1, 1, Lk); the contract's 2-D mask is (Lq, Lk), broadcast from the right
import math
import torch


def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        if Q.dim() == 4 and mask.dim() == 2:  # attention_mask (B, Lk)
            mask = mask[:, None, None, :]
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ V

# expect: forbidden_call
# Tries the fused kernel, swallows whatever happens, falls back to zeros.
import torch
import torch.nn.functional as F


def scaled_dot_product_attention(Q, K, V, mask=None):
    try:
        return F.scaled_dot_product_attention(Q, K, V, attn_mask=mask)
    except BaseException:
        return torch.zeros(*Q.shape[:-1], V.shape[-1])

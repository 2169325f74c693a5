# expect: forbidden_call
import torch


def scaled_dot_product_attention(Q, K, V, mask=None):
    return torch.ops.aten.scaled_dot_product_attention(Q, K, V, attn_mask=mask)

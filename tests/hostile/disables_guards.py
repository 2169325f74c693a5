# expect: forbidden_call
import torch
import torch.nn.functional as F


def scaled_dot_product_attention(Q, K, V, mask=None):
    with torch._C.DisableTorchFunction():
        return F.scaled_dot_product_attention(Q, K, V, attn_mask=mask)

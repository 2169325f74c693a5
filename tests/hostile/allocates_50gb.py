# expect: memory_limit
import torch


def scaled_dot_product_attention(Q, K, V, mask=None):
    big = torch.empty(50 * 2**30 // 4, dtype=torch.float32)
    return big[: Q.numel()].view_as(Q)

# expect: too_much_memory
# mistake: ordinary softmax attention (different values, and S x S memory)
import torch


def linear_attention(Q, K, V, eps=1e-6):
    return torch.softmax(Q @ K.transpose(1, 2) / Q.shape[-1] ** 0.5, dim=-1) @ V

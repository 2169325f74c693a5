# expect: wrong_answer
import torch


def scaled_dot_product_attention(Q, K, V, mask=None):
    return torch.full((*Q.shape[:-1], V.shape[-1]), float("nan"))

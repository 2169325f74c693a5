# expect: runtime_error
# Looks for a file of expected outputs in its working directory.
import torch


def scaled_dot_product_attention(Q, K, V, mask=None):
    return torch.load("expected.pt")

# expect: accepted
# Changes the working directory: harmless, the grader uses absolute paths.
import os

def _attention(Q, K, V, mask=None):
    import math

    import torch

    s = Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1))
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return torch.softmax(s, dim=-1) @ V

os.chdir("/")


def scaled_dot_product_attention(Q, K, V, mask=None):
    os.chdir("/tmp")
    return _attention(Q, K, V, mask)

# expect: accepted
# Prints a lot (under the output limit); the verdict is unaffected.
import math

import torch

print("x" * 1_000_000)


def scaled_dot_product_attention(Q, K, V, mask=None):
    print("hello from the learner")
    s = Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1))
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return torch.softmax(s, dim=-1) @ V

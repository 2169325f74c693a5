# expect: runtime_error
# needs: confinement
# Rewrites its own file while it is graded (to change what the grader reads afterwards: the keyword
# defaults, the stored hash, the code the history shows): the learner's folder is read-only to it.
import math

import torch

with open(__file__, "a") as f:
    f.write("\n# rewritten while graded\n")


def scaled_dot_product_attention(Q, K, V, mask=None):
    s = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return torch.softmax(s, dim=-1) @ V

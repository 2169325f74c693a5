# expect: runtime_error
# needs: confinement
# Makes itself the last process the kernel's out-of-memory killer would pick (oom_score_adj -1000), then holds
# memory: when the machine runs short, the killer takes the grader or the user's other programs instead. The
# worker may write nothing under /proc, and has given up the capability that lowers the score: a
# PermissionError, a runtime error.
import math

import torch

with open("/proc/self/oom_score_adj", "w") as f:
    f.write("-1000")


def scaled_dot_product_attention(Q, K, V, mask=None):
    s = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return torch.softmax(s, -1) @ V

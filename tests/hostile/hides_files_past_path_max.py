# expect: memory_limit
# args: --memory-limit 100
# Writes 128 MB of files in its scratch directory, but 20 folders deep under names of 250 characters: the
# grader's watch listed the folder by full paths, and past the system's longest path (4096 bytes) it could no
# longer list them, so it saw nothing. If that works, it returns the right answer.
import math
import os

import torch

_name = "d" * 250
for _ in range(20):
    os.mkdir(_name)
    os.chdir(_name)
_chunk = b"\1" * (8 << 20)
for i in range(16):
    with open(f"f{i}", "wb") as f:
        f.write(_chunk)


def scaled_dot_product_attention(Q, K, V, mask=None):
    s = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return torch.softmax(s, -1) @ V

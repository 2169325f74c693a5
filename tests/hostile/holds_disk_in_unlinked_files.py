# expect: memory_limit
# needs: confinement
# args: --memory-limit 100
# Writes 128 MB into files in its scratch directory and unlinks each while keeping it open: the disk (or
# tmpfs memory) stays taken, but the folder the grader watches looks empty. If that works, it returns the
# right answer. (Linux: the watch reads the open files from /proc; tagged with the confinement it comes with.)
import math
import os

import torch

_held = []
_chunk = b"\1" * (8 << 20)
for i in range(16):
    fd = os.open(f"held{i}", os.O_RDWR | os.O_CREAT, 0o600)
    os.unlink(f"held{i}")
    os.write(fd, _chunk)
    _held.append(fd)


def scaled_dot_product_attention(Q, K, V, mask=None):
    s = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return torch.softmax(s, -1) @ V

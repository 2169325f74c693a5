# expect: memory_limit
# args: --memory-limit 300
# Writes 400 MB of files in its scratch directory (where TMPDIR points), each under the output limit
# per file: disk (or memory, where that folder is a tmpfs) that no rlimit counts. If that works, it
# returns the right answer. The judge watches the folder and stops the worker past the memory limit.
import math
import os
import tempfile

import torch

_chunk = b"\1" * (4 << 20)
_dir = tempfile.mkdtemp()
for i in range(100):
    with open(os.path.join(_dir, f"f{i}"), "wb") as f:
        f.write(_chunk)


def scaled_dot_product_attention(Q, K, V, mask=None):
    s = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return torch.softmax(s, -1) @ V

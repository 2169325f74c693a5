# expect: runtime_error
# needs: confinement
# args: --memory-limit 300
# Holds 400 MB in anonymous files (memfd_create, written, never mapped): tmpfs pages that the
# address-space limit never counts. If that works, it returns the right answer. memfd_create is
# refused (PermissionError): a runtime error, not an accepted answer that broke the memory limit.
import math
import os

import torch

_held = []
_chunk = b"\1" * (4 << 20)
for i in range(100):
    fd = os.memfd_create(f"x{i}")
    os.write(fd, _chunk)
    _held.append(fd)


def scaled_dot_product_attention(Q, K, V, mask=None):
    s = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return torch.softmax(s, -1) @ V

# expect: runtime_error
# needs: confinement
# Lists /dev/shm and reads what it can there: the POSIX shared memory of the user's other programs (a
# browser's pages, an editor's buffers, another grade's tensors), whose files carry the user's permissions.
# What it reads could come back in its report (or, in `torchcode grade --feedback full`, in the student's
# feedback). If it can list the folder, it returns the right answer. A worker on the CPU has no use for
# /dev/shm and cannot reach it: a PermissionError, a runtime error.
import math
import os

import torch

seen = {}
for name in os.listdir("/dev/shm"):
    try:
        with open(os.path.join("/dev/shm", name), "rb") as f:
            seen[name] = f.read(64)
    except OSError:
        pass


def scaled_dot_product_attention(Q, K, V, mask=None):
    s = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return torch.softmax(s, -1) @ V

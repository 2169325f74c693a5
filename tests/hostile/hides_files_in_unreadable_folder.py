# expect: memory_limit
# args: --memory-limit 100
# Writes 128 MB of files into a folder of its scratch directory, then takes the folder's permissions away
# (chmod 000): a grader not running as root could no longer list it, so its watch saw nothing there (and the
# clean-up afterwards could not remove it). If that works, it returns the right answer. Confinement now refuses
# chmod (EPERM), and the watch stops a worker whose folders it cannot look into where confinement is missing; the
# clean-up gives the folder its permissions back first.
import math
import os

import torch

os.mkdir("hidden")
_chunk = b"\1" * (8 << 20)
for i in range(16):
    with open(os.path.join("hidden", f"f{i}"), "wb") as f:
        f.write(_chunk)
try:
    os.chmod("hidden", 0)
except PermissionError:  # refused by the sandbox: the files stay in sight
    pass


def scaled_dot_product_attention(Q, K, V, mask=None):
    s = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return torch.softmax(s, -1) @ V

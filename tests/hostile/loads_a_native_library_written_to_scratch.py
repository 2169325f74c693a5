# expect: forbidden_call
# Hostile (round 22): copies a native library into the scratch folder (the one place the worker may write; a real
# attack writes its own, compiled from C) and loads it with ctypes: its code would run in the worker, out of every
# guard's sight. Loading a library the learner could have written is refused, whoever asks.
import ctypes
import math
import shutil

import torch

with open("/proc/self/maps") as maps:
    libc = next(line.split()[-1] for line in maps if "/libc.so" in line or "/libc-" in line)
shutil.copyfile(libc, "helper.so")
native = ctypes.CDLL("./helper.so")


def scaled_dot_product_attention(Q, K, V, mask=None):
    s = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return torch.softmax(s, dim=-1) @ V

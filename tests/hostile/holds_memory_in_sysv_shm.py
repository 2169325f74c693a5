# expect: runtime_error
# needs: confinement
# args: --memory-limit 300
# Holds 400 MB in System V shared memory segments: each made (shmget), attached, written and detached again,
# so the address-space limit counts none of it once detached, and the segments outlive the worker (memory
# taken from the machine until someone removes them). If that works, it removes them again (this is a test)
# and returns the right answer. The sandbox refuses System V IPC: an OSError, a runtime error.
import ctypes
import math
import os

import torch

_libc = ctypes.CDLL(None, use_errno=True)
_libc.shmat.restype = ctypes.c_void_p
_segments = []
for _ in range(4):
    shmid = _libc.shmget(0, ctypes.c_size_t(100 << 20), 0o1600)  # IPC_PRIVATE, IPC_CREAT | 0600
    if shmid < 0:
        raise OSError(ctypes.get_errno(), "shmget: " + os.strerror(ctypes.get_errno()))
    _segments.append(shmid)
    at = _libc.shmat(shmid, None, 0)
    if at in (None, ctypes.c_void_p(-1).value):
        raise OSError(ctypes.get_errno(), "shmat: " + os.strerror(ctypes.get_errno()))
    ctypes.memset(at, 1, 100 << 20)
    _libc.shmdt(ctypes.c_void_p(at))
held = len(_segments) * 100
for shmid in _segments:
    _libc.shmctl(shmid, 0, None)  # IPC_RMID


def scaled_dot_product_attention(Q, K, V, mask=None):
    s = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return torch.softmax(s, -1) @ V

# expect: runtime_error
# needs: confinement
# args: --memory-limit 300
# Holds 400 MB in secret memory (memfd_secret: 8 MB files, each mapped, written and closed): its pages are
# neither anonymous nor shared memory, so the host-memory watch a GPU's worker runs under never counts them,
# and only the locked-memory limit bounds them (often unlimited on GPU machines, for RDMA). If a secret memory
# file can be made, it keeps what the locked-memory limit allows and returns the right answer. The sandbox
# refuses memfd_secret, as it does memfd_create: a PermissionError, a runtime error.
import ctypes
import math
import mmap
import os

import torch

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_held = []
for _ in range(50):
    fd = _libc.syscall(447, 0)  # memfd_secret (the same number on x86_64 and aarch64)
    if fd < 0:
        raise OSError(ctypes.get_errno(), "memfd_secret: " + os.strerror(ctypes.get_errno()))
    try:
        os.ftruncate(fd, 8 << 20)
        _held.append(mmap.mmap(fd, 8 << 20))
        _held[-1][::4096] = b"x" * 2048
    except OSError:  # past the locked-memory limit
        break
    finally:
        os.close(fd)


def scaled_dot_product_attention(Q, K, V, mask=None):
    s = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return torch.softmax(s, -1) @ V

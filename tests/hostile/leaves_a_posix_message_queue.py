# expect: runtime_error
# needs: confinement
# Opens a POSIX message queue (mq_open: a name in the kernel's queue namespace, not a file, so the filesystem
# confinement never sees it): it outlives the worker, every later worker can open it by name (a channel from
# one grade to the next, another student's in `torchcode grade`), and its messages are kernel memory no limit
# counts. If that works, it removes the queue again (this is a test) and returns the right answer. The
# sandbox refuses mq_open: an OSError, a runtime error.
import ctypes
import math
import os

import torch

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
SYS_MQ_OPEN, SYS_MQ_UNLINK = {"x86_64": (240, 241), "aarch64": (180, 181)}[os.uname().machine]
_name = b"torchcode-hostile-queue"
_q = _libc.syscall(SYS_MQ_OPEN, _name, os.O_CREAT | os.O_RDWR, 0o600, None)
if _q < 0:
    raise OSError(ctypes.get_errno(), "mq_open: " + os.strerror(ctypes.get_errno()))
os.close(_q)
_libc.syscall(SYS_MQ_UNLINK, _name)


def scaled_dot_product_attention(Q, K, V, mask=None):
    s = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return torch.softmax(s, -1) @ V

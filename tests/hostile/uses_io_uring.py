# expect: runtime_error
# needs: confinement
# Sets up an io_uring: its operations (IORING_OP_SOCKET, IORING_OP_OPENAT, ...) are run by the kernel
# without passing through the system-call filter, so a network socket the filter refuses to `socket()`
# (no network for a submission) can be made through the ring. If the ring can be set up, it closes it again
# and returns the right answer. The sandbox refuses io_uring: an OSError, a runtime error.
import ctypes
import math
import os

import torch

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_params = (ctypes.c_uint32 * 30)()  # struct io_uring_params, zeroed (120 bytes)
_fd = _libc.syscall(425, 8, _params)  # io_uring_setup (the same number on x86_64 and aarch64)
if _fd < 0:
    raise OSError(ctypes.get_errno(), "io_uring_setup: " + os.strerror(ctypes.get_errno()))
os.close(_fd)


def scaled_dot_product_attention(Q, K, V, mask=None):
    s = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return torch.softmax(s, -1) @ V

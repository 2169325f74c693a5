# expect: runtime_error
# needs: confinement
# Keeps data in the kernel's key store (add_key into the user keyring), which outlives the worker and which
# every later worker of the same user can read: a channel past the sandbox from one grade to the next (another
# student's, in `torchcode grade`), and kernel memory the limits never count. If that works, it revokes the key
# again (this is a test) and returns the right answer. The sandbox refuses the key system calls: an OSError,
# a runtime error.
import ctypes
import math
import os

import torch

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
SYS_ADD_KEY, SYS_KEYCTL = {"x86_64": (248, 250), "aarch64": (217, 219)}[os.uname().machine]
_key = _libc.syscall(SYS_ADD_KEY, b"user", b"torchcode-hostile-keyring", b"left for the next grade", 23,
                     ctypes.c_long(-4))  # KEY_SPEC_USER_KEYRING
if _key < 0:
    raise OSError(ctypes.get_errno(), "add_key: " + os.strerror(ctypes.get_errno()))
_libc.syscall(SYS_KEYCTL, 3, ctypes.c_long(_key))  # KEYCTL_REVOKE


def scaled_dot_product_attention(Q, K, V, mask=None):
    s = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return torch.softmax(s, -1) @ V

# expect: crashed
# needs: confinement
# Forks through the x32 system call numbers (the 64-bit entry with bit 30 set: fork = 0x40000000 | 57).
import ctypes
import math
import mmap
import os
import platform
import time

import torch


def _x32(nr: int) -> int:
    code = b"\xb8" + (0x40000000 | nr).to_bytes(4, "little") + b"\x0f\x05\xc3"  # mov eax, nr; syscall; ret
    buf = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    buf.write(code)
    return ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(buf)))()


def scaled_dot_product_attention(Q, K, V, mask=None):
    if platform.machine() == "x86_64" and _x32(57) == 0:  # the child, if x32 were allowed
        os.setsid()
        time.sleep(600)
        os._exit(0)
    s = Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1))
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return torch.softmax(s, dim=-1) @ V

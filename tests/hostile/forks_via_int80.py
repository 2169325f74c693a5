# expect: crashed
# needs: confinement
# Forks through the 32-bit system call entry (`int 0x80`, fork = 2), which a filter checking only
# 64-bit numbers misses; the child leaves the worker's session and would outlive the check. The
# sandbox kills a process that makes a 32-bit system call (SIGSYS).
import ctypes
import math
import mmap
import os
import platform
import time

import torch


def _int80(nr: int) -> int:
    code = b"\xb8" + nr.to_bytes(4, "little") + b"\xcd\x80\xc3"  # mov eax, nr; int 0x80; ret
    buf = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    buf.write(code)
    return ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(buf)))()


def scaled_dot_product_attention(Q, K, V, mask=None):
    if platform.machine() == "x86_64" and _int80(2) == 0:  # the child
        os.setsid()
        time.sleep(600)
        os._exit(0)
    s = Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1))
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return torch.softmax(s, dim=-1) @ V

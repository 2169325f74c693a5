# expect: runtime_error
# needs: confinement
# Probes every other way to signal the grader (signal 0 delivers nothing): kill of its process group,
# tgkill, rt_sigqueueinfo, pidfd_send_signal, and SIGIO ownership (F_SETOWN). All are refused.
import ctypes
import fcntl
import os
import socket

zygote = os.getppid()
with open(f"/proc/{zygote}/stat") as f:
    grader = int(f.read().rsplit(")", 1)[1].split()[1])
libc = ctypes.CDLL(None, use_errno=True)
SYS = {"tgkill": 234, "rt_sigqueueinfo": 129, "pidfd_open": 434, "pidfd_send_signal": 424}
worked = []
for pid in (grader, zygote):
    for name, call in [
        ("kill", lambda: os.kill(pid, 0)),
        ("killpg", lambda: os.killpg(os.getpgid(pid), 0)),
        ("tgkill", lambda: libc.syscall(SYS["tgkill"], pid, pid, 0)),
        ("rt_sigqueueinfo", lambda: libc.syscall(SYS["rt_sigqueueinfo"], pid, 0, ctypes.create_string_buffer(128))),
        ("pidfd_send_signal", lambda: libc.syscall(SYS["pidfd_send_signal"], libc.syscall(SYS["pidfd_open"], pid, 0),
                                                   0, None, 0)),
        ("F_SETOWN", lambda: fcntl.fcntl(socket.socket(socket.AF_UNIX).fileno(), fcntl.F_SETOWN, pid)),
    ]:
        try:
            if call() in (None, 0):
                worked.append(f"{name}({pid})")
        except OSError:
            pass
if not worked:
    raise PermissionError("every way to signal the grader was refused")


def scaled_dot_product_attention(Q, K, V, mask=None):  # reached only if a signal got through
    import math

    import torch

    s = Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1))
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return torch.softmax(s, dim=-1) @ V

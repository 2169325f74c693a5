# expect: time_limit
# Patches the socket class the worker's own connection belongs to: once the first case's answer has been
# computed, the worker's next read (of its next case) stalls forever. The answers are right, but the worker
# never takes the next case. The judge's deadline ends it (no hang, no verdict from a stale reply).
# (It used a profile hook before; those are refused by name now: see setprofile in hatches.ESCAPE_HATCHES.)
import math
import socket
import time

_real = socket.socket.recv_into
_armed = []


def _stall(self, *args, **kwargs):
    if _armed:
        while True:
            time.sleep(1)
    return _real(self, *args, **kwargs)


socket.socket.recv_into = _stall


def scaled_dot_product_attention(Q, K, V, mask=None):
    import torch

    s = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    _armed.append(True)
    return torch.softmax(s, -1) @ V

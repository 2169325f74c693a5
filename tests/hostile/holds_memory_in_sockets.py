# expect: runtime_error
# args: --memory-limit 300
# Holds 400 MB in the kernel buffers of unix socket pairs (data sent and never read), which the
# address-space limit never counts: as many pairs as it takes, each buffer as large as the system lets
# an unprivileged process make it. If that works, it returns the right answer. A worker may open a few
# dozen descriptors only: "Too many open files", a runtime error.
import math
import socket

import torch

_pairs = []
_chunk = b"\1" * (64 << 10)
held = 0
while held < 400 << 20:
    a, b = socket.socketpair()
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 << 20)  # clamped to wmem_max
    a.setblocking(False)
    try:
        while held < 400 << 20:
            held += a.send(_chunk)
    except BlockingIOError:
        pass
    _pairs.append((a, b))


def scaled_dot_product_attention(Q, K, V, mask=None):
    s = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return torch.softmax(s, -1) @ V

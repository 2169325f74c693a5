# expect: runtime_error
# args: --memory-limit 300
# Started by root, a worker could force a socket's buffer past the system's maximum
# (SO_SNDBUFFORCE, CAP_NET_ADMIN) and hold 400 MB there, outside the address-space limit; if
# that works, it returns the right answer. The worker gives up every capability before any
# learner code runs: PermissionError, a runtime error.
import math
import socket

import torch

a, b = socket.socketpair()
a.setsockopt(socket.SOL_SOCKET, 32, 512 << 20)  # SO_SNDBUFFORCE
a.setblocking(False)
held, _chunk = 0, b"\1" * (1 << 20)
while held < 400 << 20:
    held += a.send(_chunk)


def scaled_dot_product_attention(Q, K, V, mask=None):
    s = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return torch.softmax(s, -1) @ V

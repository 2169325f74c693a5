# expect: crashed
# Announces a 1 GiB reply (and starts sending it): refused before the judge allocates anything.
# The worker's socket is easy to find (/proc/self/fd); whatever arrives on it yields a verdict.
import json
import os
import socket
import struct


def _socket() -> socket.socket:
    for fd in sorted(map(int, os.listdir("/proc/self/fd"))):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith("socket:"):
                return socket.socket(fileno=os.dup(fd))
        except OSError:
            continue
    raise RuntimeError("no socket")


def _send(header, blob) -> None:
    raw = header if isinstance(header, str) else json.dumps(header)
    raw = raw.encode()
    sock = _socket()
    size = (1 << 30) if blob is None else len(blob)
    sock.sendall(struct.pack("!IQ", len(raw), size) + raw)
    sock.sendall(bytes(1 << 20) if blob is None else blob)


def scaled_dot_product_attention(Q, K, V, mask=None):
    header = {"outputs": [{"T": 0}], "input_grads": {}, "param_grads": {}, "seconds": 0.1, "tensors": [{"dtype": "uint8", "shape": [1 << 30], "offset": 0, "nbytes": 1 << 30}]}
    _send(header, None)
    return Q

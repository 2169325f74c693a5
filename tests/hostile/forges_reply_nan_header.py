# expect: crashed
# Puts NaN and Infinity in the header (which strict JSON does not have).
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
    header = '{"outputs": [], "input_grads": {}, "param_grads": {}, "seconds": NaN, "largest": Infinity, "tensors": []}'
    _send(header, b"")
    return Q

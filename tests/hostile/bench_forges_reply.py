# expect: accepted
# Correct, but at the benchmark's shapes it writes its own reply on the worker's socket ("took
# a nanosecond, used one byte") before the real one: a bench that trusts the worker's figures
# reads the forged one. Timing from outside, with every rep's outputs checked, gives no fast row.
import json
import math
import os
import socket
import struct

import torch


def _socket() -> socket.socket:
    for fd in sorted(map(int, os.listdir("/proc/self/fd"))):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith("socket:"):
                return socket.socket(fileno=os.dup(fd))
        except OSError:
            continue
    raise RuntimeError("no socket")


def _forge() -> None:
    raw = json.dumps({"seconds": 1e-9, "peak_bytes": 1, "tensors": []}).encode()
    _socket().sendall(struct.pack("!IQ", len(raw), 0) + raw)


def scaled_dot_product_attention(Q, K, V, mask=None):
    if Q.dim() == 4 and Q.shape[1] == 8 and Q.shape[-1] == 64:  # the benchmark's inputs, never a graded case
        _forge()
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ V

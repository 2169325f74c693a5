# expect: accepted
# Correct, but at the benchmark's shapes it sends a well-formed reply of its own (the right output,
# in the grader's wire format) and then returns, so the worker sends a second one: the grader's next
# request finds a reply already waiting, "computed" in no time. It holds the previous call's output,
# and every call has new inputs: wrong, so a failure, never a fast row.
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


def _reply(out: torch.Tensor) -> None:
    data = out.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
    meta = [{"dtype": "float32", "shape": list(out.shape), "offset": 0, "nbytes": len(data)}]
    raw = json.dumps({"outputs": [{"T": 0, "device": "cpu"}], "peak_bytes": 1, "tensors": meta}).encode()
    _socket().sendall(struct.pack("!IQ", len(raw), len(data)) + raw + data)


def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    out = torch.softmax(scores, dim=-1) @ V
    if Q.dim() == 4 and Q.shape[1] == 8 and Q.shape[-1] == 64 and Q.dtype == torch.float32:
        _reply(out)
    return out

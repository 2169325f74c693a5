"""The wire format between the trusted process and the sandboxed worker.

A message is a JSON header plus raw tensor bytes. Nothing is ever unpickled: the
trusted side rebuilds tensors with ``torch.frombuffer`` from a whitelisted dtype and
a validated shape, so whatever the learner's process writes can at worst be a
malformed message (a crash verdict), never code run in the judge.

Values inside the header:
  {"T": i}            tensor i of the message
  {"K": i}            tensor i, not differentiated (``Const``)
  {"L": [...]}        list / tuple
  {"P": [step, ...]}  an earlier output of the learner (``Prev``)
  {"NS": {...}}       an attribute object (``Config``)
  {"X": "typename"}   a returned object of an unsupported type (learner side only)
  null / bool / int / float / str as themselves
"""

from __future__ import annotations

import json
import math
import socket
import struct
import time

import torch

DTYPES = {
    "float64": torch.float64, "float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
    "int64": torch.int64, "int32": torch.int32, "int16": torch.int16, "int8": torch.int8, "uint8": torch.uint8,
    "bool": torch.bool,
}
DTYPE_NAMES = {v: k for k, v in DTYPES.items()}
_HEAD = struct.Struct("!IQ")
MAX_HEADER = 64 << 20
MAX_BLOBS = 4 << 30


class ProtocolError(Exception):
    """The other side sent something that is not a well-formed message."""


class PeerClosed(Exception):
    """The other side closed the connection (the worker exited or died)."""


class Timeout(Exception):
    pass


class Message:
    """Builds one outgoing message: ``m.value(obj)`` encodes a value, ``m.send(sock, header)``."""

    def __init__(self):
        self.blobs: list[bytes] = []
        self.meta: list[dict] = []
        self.offset = 0

    def tensor(self, t: torch.Tensor) -> dict:
        t = t.detach()
        if t.device.type != "cpu":
            t = t.cpu()
        dtype = DTYPE_NAMES.get(t.dtype)
        if dtype is None:
            raise ProtocolError(f"unsupported dtype {t.dtype}")
        data = t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
        self.meta.append({"dtype": dtype, "shape": list(t.shape), "offset": self.offset, "nbytes": len(data)})
        self.blobs.append(data)
        self.offset += len(data)
        return {"T": len(self.meta) - 1}

    def value(self, v):
        from torchcode.grader.cases import Config, Const, Prev  # the author API types

        if isinstance(v, torch.Tensor):
            return self.tensor(v)
        if isinstance(v, Const):
            return {"K": self.tensor(v.tensor)["T"]}
        if v is None or isinstance(v, (bool, int, str)):
            return v
        if isinstance(v, float):
            return v if math.isfinite(v) else {"F": repr(v)}
        if isinstance(v, (list, tuple)):
            return {"L": [self.value(x) for x in v]}
        if isinstance(v, Prev):
            return {"P": [v.step, *v.path]}
        if isinstance(v, Config):
            return {"NS": {k: self.value(x) for k, x in v.fields.items()}}
        raise ProtocolError(f"cannot send a {type(v).__name__}")

    def send(self, sock: socket.socket, header: dict) -> None:
        header = dict(header, tensors=self.meta)
        raw = json.dumps(header).encode()
        sock.sendall(_HEAD.pack(len(raw), self.offset) + raw)
        for b in self.blobs:
            sock.sendall(b)


def _recv_exact(sock: socket.socket, n: int, deadline: float | None) -> bytes:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise Timeout()
            sock.settimeout(left)
        else:
            sock.settimeout(None)
        try:
            k = sock.recv_into(view[got:], n - got)
        except socket.timeout:
            raise Timeout() from None
        except (ConnectionResetError, BrokenPipeError):
            raise PeerClosed() from None
        if k == 0:
            raise PeerClosed()
        got += k
    return bytes(buf)


def receive(sock: socket.socket, deadline: float | None = None) -> tuple[dict, list[torch.Tensor]]:
    """Read one message; return its header and its tensors. Validates everything."""
    hlen, blen = _HEAD.unpack(_recv_exact(sock, _HEAD.size, deadline))
    if hlen > MAX_HEADER or blen > MAX_BLOBS:
        raise ProtocolError("message too large")
    try:
        header = json.loads(_recv_exact(sock, hlen, deadline))
    except (ValueError, UnicodeDecodeError) as e:
        raise ProtocolError(f"bad header: {e}") from None
    blobs = _recv_exact(sock, blen, deadline) if blen else b""
    if not isinstance(header, dict) or not isinstance(header.get("tensors"), list):
        raise ProtocolError("header is not a message")
    tensors = []
    for m in header["tensors"]:
        try:
            dtype = DTYPES[m["dtype"]]
            shape = [int(s) for s in m["shape"]]
            off, nbytes = int(m["offset"]), int(m["nbytes"])
        except (KeyError, TypeError, ValueError):
            raise ProtocolError("bad tensor description") from None
        numel = math.prod(shape)
        itemsize = torch.empty((), dtype=dtype).element_size()
        if any(s < 0 for s in shape) or numel * itemsize != nbytes or off < 0 or off + nbytes > len(blobs):
            raise ProtocolError("tensor description does not match its bytes")
        if numel == 0:
            tensors.append(torch.empty(shape, dtype=dtype))
        else:
            tensors.append(torch.frombuffer(bytearray(blobs[off:off + nbytes]), dtype=dtype).reshape(shape))
    return header, tensors


def decode(v, tensors: list[torch.Tensor]):
    """Turn a header value back into Python/torch objects (``Prev`` and ``Config`` stay tagged)."""
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, list):
        raise ProtocolError("bare list in a value")
    if isinstance(v, dict) and len(v) == 1:
        (tag, x), = v.items()
        if tag == "T" and isinstance(x, int) and 0 <= x < len(tensors):
            return tensors[x]
        if tag == "K" and isinstance(x, int) and 0 <= x < len(tensors):
            return ConstTensor(tensors[x])
        if tag == "L" and isinstance(x, list):
            return tuple(decode(i, tensors) for i in x)
        if tag == "F" and x in ("nan", "inf", "-inf"):
            return float(x)
        if tag == "P" and isinstance(x, list) and x and all(isinstance(i, int) for i in x):
            return PrevRef(x[0], tuple(x[1:]))
        if tag == "NS" and isinstance(x, dict):
            return NamespaceValue({str(k): decode(i, tensors) for k, i in x.items()})
        if tag == "X" and isinstance(x, str):
            return Unsupported(x[:200])
    raise ProtocolError(f"bad value {str(v)[:80]}")


class PrevRef(tuple):
    """A decoded ``Prev``: (step, path)."""

    def __new__(cls, step, path):
        return super().__new__(cls, (step, path))


class ConstTensor:
    """A decoded ``Const``: an input tensor that is not differentiated."""

    def __init__(self, tensor):
        self.tensor = tensor


class NamespaceValue(dict):
    """A decoded ``Config``: becomes ``types.SimpleNamespace`` where it is used."""


class Unsupported(str):
    """The learner returned an object of this type name, which is not a tensor."""

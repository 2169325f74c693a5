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
  {"PV": [step, [path], op, dim, ...]}  ... narrowed or index-selected first (``Prev(...).narrow``)
  {"R": [step, arg, i]}  the tensor call ``step`` got as ``arg`` (an int or a name), refilled with tensor i
  {"NS": {...}}       an attribute object (``Config``)
  {"X": "typename"}   a returned object of an unsupported type (learner side only)
  null / bool / int / float / str as themselves
"""

from __future__ import annotations

import _socket
import json
import math
import socket
import struct
import time
from dataclasses import dataclass, field

import torch

_T = torch._C.TensorBase  # its methods, called as functions (Message.tensor)
# What a worker sends with, bound before any submission runs: a submission that replaces socket.socket.sendall or
# json.dumps (or json's encoder classes) in the worker cannot rewrite or drop what goes on the wire through them.
# _socket.socket is a built-in type (its methods cannot be replaced); the encoder is json's C one, made once.
_sendall = _socket.socket.sendall
try:
    _encoder = json.encoder.c_make_encoder(None, None, json.encoder.encode_basestring_ascii, None, ": ", ", ",
                                           False, False, True)
except (AttributeError, TypeError):  # a Python without json's C speedups
    _encoder = None
_dumps = json.dumps


def _to_json(obj) -> str:
    if _encoder is None:
        return _dumps(obj)
    return "".join(_encoder(obj, 0))

DTYPES = {
    "float64": torch.float64, "float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
    "int64": torch.int64, "int32": torch.int32, "int16": torch.int16, "int8": torch.int8, "uint8": torch.uint8,
    "bool": torch.bool,
}
DTYPE_NAMES = {v: k for k, v in DTYPES.items()}
_ITEMSIZE = {v: v.itemsize for v in DTYPES.values()}
_HEAD = struct.Struct("!IQ")
ALIGN = 64  # tensor bytes start at multiples of this, so that received tensors can be views
MAX_DEPTH = 32  # nesting of JSON values in a header
MAX_DIMS = 16


@dataclass(frozen=True)
class Budget:
    """What one incoming message may hold, checked before anything is allocated."""

    header: int = 1 << 20  # bytes of JSON
    tensors: int = 0  # how many tensors
    nbytes: int = 0  # bytes of tensor data


# The worker receives from the trusted side (which is trusted, but a wire format checks anyway).
FROM_GRADER = Budget(header=64 << 20, tensors=1 << 16, nbytes=16 << 30)
NOTE = Budget(header=4 << 10)  # notes carry no tensors


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
        # torch's own functions, taken before any submission ran: a method looked up on the tensor could be one its
        # code set on the tensor itself (out.detach = ...) or on its class, and would run here, unmeasured
        t = _T.detach(t)
        if t.device.type != "cpu":
            t = _T.cpu(t)
        dtype = DTYPE_NAMES.get(t.dtype)
        if dtype is None:
            raise ProtocolError(f"unsupported dtype {t.dtype}")
        data = _T.numpy(_T.view(_T.reshape(_T.contiguous(t), (-1,)), torch.uint8)).tobytes() if _T.numel(t) else b""
        pad = -self.offset % ALIGN
        if pad:
            self.blobs.append(bytes(pad))
            self.offset += pad
        self.meta.append({"dtype": dtype, "shape": list(t.shape), "offset": self.offset, "nbytes": len(data)})
        self.blobs.append(data)
        self.offset += len(data)
        return {"T": len(self.meta) - 1}

    @property
    def nbytes(self) -> int:
        return self.offset

    def value(self, v):
        from torchcode.grader.cases import Alias, Config, Const, Prev, Refill  # the author API types

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
            return {"P": [v.step, *v.path]} if not v.view else {"PV": [v.step, list(v.path), *_view_wire(v.view)]}
        if isinstance(v, Refill):
            return {"R": [v.step, v.arg, self.tensor(v.tensor)["T"]]}
        if isinstance(v, Alias):
            return {"A": [v.step, v.arg]}
        if isinstance(v, Config):
            return {"NS": {k: self.value(x) for k, x in v.fields.items()}}
        raise ProtocolError(f"cannot send a {type(v).__name__}")

    def send(self, sock: socket.socket, header: dict) -> None:
        for b in self.frames(header):
            _sendall(sock, b)

    def frames(self, header: dict) -> list[bytes]:
        """The message's bytes on the wire, in pieces."""
        raw = _to_json(dict(header, tensors=self.meta)).encode()
        return [_HEAD.pack(len(raw), self.offset) + raw, *self.blobs]


def _recv_exact(sock: socket.socket, n: int, deadline: float | None) -> bytearray:
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
    return buf


def _reject_constant(name: str):
    raise ValueError(f"{name} is not allowed")


def _check_depth(obj, limit: int = MAX_DEPTH) -> None:
    """Nesting at most ``limit`` deep (iteratively: a deep value cannot exhaust the stack here)."""
    if not isinstance(obj, (dict, list)):
        return
    stack = [(obj, 1)]  # containers only: a long list of numbers costs one look at each, no more
    while stack:
        v, d = stack.pop()
        if d > limit:
            raise ProtocolError(f"header nested deeper than {limit}")
        for x in (v.values() if isinstance(v, dict) else v):
            if isinstance(x, (dict, list)):
                stack.append((x, d + 1))


def parse_header(raw: bytes | bytearray) -> dict:
    """JSON, without NaN/Infinity, nested at most MAX_DEPTH deep, an object at the top."""
    try:
        header = json.loads(raw, parse_constant=_reject_constant)
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        raise ProtocolError(f"bad header: {str(e)[:100]}") from None
    _check_depth(header)
    if not isinstance(header, dict):
        raise ProtocolError("header is not an object")
    return header


def _int(v, lo: int, hi: int) -> int:
    if type(v) is not int or not lo <= v <= hi:
        raise ProtocolError("bad tensor description")
    return v


def _tensor_plan(metas, blen: int, budget: Budget) -> list[tuple[torch.dtype, list[int], int, int]]:
    """Validate the tensor descriptions: known dtypes, sane shapes, regions in order, inside the data."""
    if not isinstance(metas, list) or len(metas) > budget.tensors:
        raise ProtocolError(f"a message may carry at most {budget.tensors} tensors")
    plan, end = [], 0
    for m in metas:
        if not isinstance(m, dict) or not isinstance(m.get("dtype"), str) or m["dtype"] not in DTYPES:
            raise ProtocolError("bad tensor description")
        dtype = DTYPES[m["dtype"]]
        shape = m.get("shape")
        if not isinstance(shape, list) or len(shape) > MAX_DIMS:
            raise ProtocolError("bad tensor description")
        shape = [_int(s, 0, 1 << 31) for s in shape]
        off, nbytes = _int(m.get("offset"), end, blen), _int(m.get("nbytes"), 0, blen)
        if math.prod(shape) * _ITEMSIZE[dtype] != nbytes or off + nbytes > blen:
            raise ProtocolError("tensor description does not match its bytes")
        plan.append((dtype, shape, off, nbytes))
        end = off + nbytes
    return plan


def receive(sock: socket.socket, deadline: float | None = None,
            budget: Budget = FROM_GRADER) -> tuple[dict, list[torch.Tensor]]:
    """Read one message; return its header and its tensors.

    Sizes are checked against ``budget`` before they are read, the header is parsed with its
    nesting bounded, every tensor description is validated, and tensors are views of the one
    buffer read (no copies): whatever the other side sends costs at most the budget.
    """
    hlen, blen = _HEAD.unpack(_recv_exact(sock, _HEAD.size, deadline))
    if hlen > budget.header:
        raise ProtocolError(f"header of {hlen} bytes, more than the {budget.header} allowed")
    if blen > budget.nbytes:
        raise ProtocolError(f"{blen} bytes of tensors, more than the {budget.nbytes} this message may carry")
    header = parse_header(_recv_exact(sock, hlen, deadline))
    plan = _tensor_plan(header.get("tensors"), blen, budget)
    data = _recv_exact(sock, blen, deadline) if blen else bytearray()
    tensors = []
    for dtype, shape, off, nbytes in plan:
        if nbytes == 0:
            tensors.append(torch.empty(shape, dtype=dtype))
        elif off % _ITEMSIZE[dtype] == 0:
            tensors.append(torch.frombuffer(data, dtype=dtype, count=nbytes // _ITEMSIZE[dtype], offset=off).view(shape))
        else:
            tensors.append(torch.frombuffer(bytearray(data[off:off + nbytes]), dtype=dtype).view(shape))
    return header, tensors


MAX_NOTES = 64


@dataclass
class Notes:
    """What the worker reported while it worked, before its reply. A note, once sent, is out of
    the worker's reach: the learner's code cannot take back a forbidden call it made."""

    ready: dict | None = None  # the worker's first message, sent before any learner code ran
    forbidden: list = field(default_factory=list)
    tamper: list = field(default_factory=list)
    too_large: tuple | None = None  # (elements, shape) of the first tensor over the case's limit
    set_up: bool = False  # the worker finished setting up for the learner's file, just before it ran any of it
    count: int = 0

    def add(self, note, first: bool) -> None:
        if not isinstance(note, dict):
            raise ProtocolError("bad note")
        self.count += 1
        if self.count > MAX_NOTES:
            raise ProtocolError("too many notes")
        if first and isinstance(note.get("ready"), dict):
            self.ready = note["ready"]
        if isinstance(note.get("forbidden"), str) and note["forbidden"][:200] not in self.forbidden:
            self.forbidden.append(note["forbidden"][:200])
        if note.get("set_up") is True:
            self.set_up = True
        if isinstance(note.get("tamper"), str) and note["tamper"][:300] not in self.tamper:
            self.tamper.append(note["tamper"][:300])
        n, shape = note.get("too_large"), note.get("shape")
        if type(n) is int and n > 0 and self.too_large is None:
            ok = isinstance(shape, list) and len(shape) <= MAX_DIMS and all(type(x) is int for x in shape)
            self.too_large = (n, shape if ok else [])


def receive_reply(sock: socket.socket, deadline: float | None, budget: Budget, notes: Notes,
                  first: bool = False) -> tuple[dict, list[torch.Tensor]]:
    """The next reply, after any notes (collected into ``notes``). ``first``: nothing was read yet."""
    while True:
        header, tensors = receive(sock, deadline, budget)
        if "note" not in header:
            return header, tensors
        if tensors:
            raise ProtocolError("a note carries no tensors")
        notes.add(header["note"], first)
        first = False


def note(sock: socket.socket, **fields) -> None:
    """Send a note (worker side)."""
    Message().send(sock, {"note": fields})


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
        if tag == "PV" and isinstance(x, list) and len(x) >= 3 and type(x[0]) is int and isinstance(x[1], list) \
                and all(type(i) is int for i in x[1]):
            return PrevRef(x[0], tuple(x[1]), _view_decoded(x[2:]))
        if (tag == "R" and isinstance(x, list) and len(x) == 3 and type(x[0]) is int and type(x[1]) in (int, str)
                and type(x[2]) is int and 0 <= x[2] < len(tensors)):
            return RefillRef(x[0], x[1], tensors[x[2]])
        if tag == "A" and isinstance(x, list) and len(x) == 2 and type(x[0]) is int and type(x[1]) in (int, str):
            return AliasRef(x[0], x[1])
        if tag == "NS" and isinstance(x, dict):
            return NamespaceValue({str(k): decode(i, tensors) for k, i in x.items()})
        if tag == "X" and isinstance(x, str):
            return Unsupported(x[:200])
    raise ProtocolError(f"bad value {str(v)[:80]}")


class PrevRef(tuple):
    """A decoded ``Prev``: (step, path, view)."""

    def __new__(cls, step, path, view=()):
        return super().__new__(cls, (step, path, view))


def _view_wire(view: tuple) -> list:
    op, dim, *rest = view
    return [op, dim, *(list(r) if isinstance(r, tuple) else r for r in rest)]


def _view_decoded(x: list) -> tuple:
    """("narrow", dim, start, length) or ("index_select", dim, (i, ...)), checked."""
    if x[0] == "narrow" and len(x) == 4 and all(type(i) is int for i in x[1:]):
        return tuple(x)
    if (x[0] == "index_select" and len(x) == 3 and type(x[1]) is int and isinstance(x[2], list)
            and all(type(i) is int for i in x[2])):
        return ("index_select", x[1], tuple(x[2]))
    raise ProtocolError(f"bad view {str(x)[:80]}")


class RefillRef:
    """A decoded ``Refill``: the tensor call ``step`` got as ``arg``, overwritten with ``tensor`` before this call."""

    def __init__(self, step: int, arg, tensor):
        self.step, self.arg, self.tensor = step, arg, tensor


class AliasRef(tuple):
    """A decoded ``Alias``: (step, arg), the tensor object that call was handed as that argument."""

    def __new__(cls, step, arg):
        return super().__new__(cls, (step, arg))


class ConstTensor:
    """A decoded ``Const``: an input tensor that is not differentiated."""

    def __init__(self, tensor):
        self.tensor = tensor


class NamespaceValue(dict):
    """A decoded ``Config``: becomes ``types.SimpleNamespace`` where it is used."""


class Unsupported(str):
    """The learner returned an object of this type name, which is not a tensor."""

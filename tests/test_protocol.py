"""The wire format under attack: whatever bytes arrive, the trusted side gets a message or a
ProtocolError / PeerClosed / Timeout, never another exception, and never allocates beyond the budget."""

from __future__ import annotations

import json
import random
import socket
import struct
import threading
import time
import tracemalloc

import pytest
import torch

from torchcode.grader import protocol
from torchcode.grader.verdict import clean_reply

EXPECTED = (protocol.ProtocolError, protocol.PeerClosed, protocol.Timeout)
BUDGET = protocol.Budget(header=1 << 16, tensors=8, nbytes=1 << 16)


def feed(data: bytes, budget: protocol.Budget = BUDGET, close: bool = True):
    """Send ``data`` on a socket pair and receive one message from the other end."""
    a, b = socket.socketpair()
    try:
        writer = threading.Thread(target=lambda: _write(a, data, close), daemon=True)
        writer.start()
        return protocol.receive(b, time.monotonic() + 5, budget)
    finally:
        b.close()


def _write(sock, data, close):
    try:
        sock.sendall(data)
    except OSError:
        pass
    if close:
        sock.close()


def message(header, blob: bytes = b"") -> bytes:
    raw = (header if isinstance(header, str) else json.dumps(header)).encode()
    return struct.pack("!IQ", len(raw), len(blob)) + raw + blob


def valid() -> bytes:
    m = protocol.Message()
    ref = m.tensor(torch.arange(6, dtype=torch.float32).reshape(2, 3))
    m.tensor(torch.ones(3, dtype=torch.bool))
    ref2 = m.tensor(torch.arange(4, dtype=torch.float64))
    a, b = socket.socketpair()
    m.send(a, {"outputs": [ref, ref2]})
    a.close()
    data = b.recv(1 << 20)
    b.close()
    return data


def test_a_valid_message_round_trips_as_views():
    header, tensors = feed(valid())
    assert header["outputs"] == [{"T": 0}, {"T": 2}]
    assert tensors[0].tolist() == [[0, 1, 2], [3, 4, 5]] and tensors[1].dtype is torch.bool
    assert tensors[2].dtype is torch.float64 and tensors[2].tolist() == [0, 1, 2, 3]


def test_random_bytes_and_truncations():
    rng = random.Random(1234)
    good = valid()
    cases = [bytes(rng.randrange(256) for _ in range(rng.randrange(1, 200))) for _ in range(200)]
    cases += [good[:n] for n in range(0, len(good))]  # every truncation
    for data in cases:
        with pytest.raises(EXPECTED):
            feed(data)


def test_bit_flips_of_a_valid_message():
    rng = random.Random(99)
    good = bytearray(valid())
    for _ in range(300):
        data = bytearray(good)
        for _ in range(rng.randrange(1, 4)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        try:
            header, tensors = feed(bytes(data))
        except EXPECTED:
            continue
        assert isinstance(header, dict) and all(isinstance(t, torch.Tensor) for t in tensors)


HOSTILE_TENSORS = [
    "not a list",
    [{"dtype": "float32"}],
    [{"dtype": "complex64", "shape": [1], "offset": 0, "nbytes": 8}],
    [{"dtype": "float32", "shape": [2**40, 2**40], "offset": 0, "nbytes": 16}],
    [{"dtype": "float32", "shape": [-4], "offset": 0, "nbytes": 16}],
    [{"dtype": "float32", "shape": [4], "offset": -16, "nbytes": 16}],
    [{"dtype": "float32", "shape": [4], "offset": 0, "nbytes": -16}],
    [{"dtype": "float32", "shape": [4.0], "offset": 0, "nbytes": 16}],
    [{"dtype": "float32", "shape": [True, 4], "offset": 0, "nbytes": 16}],
    [{"dtype": "float32", "shape": "4", "offset": 0, "nbytes": 16}],
    [{"dtype": "float32", "shape": [1] * 40, "offset": 0, "nbytes": 4}],
    [{"dtype": "float32", "shape": [8], "offset": 0, "nbytes": 32}],  # more than the bytes sent
    [{"dtype": "float32", "shape": [4], "offset": 0, "nbytes": 16}] * 2,  # overlapping regions
    [{"dtype": "float32", "shape": [1], "offset": 0, "nbytes": 4}] * 9,  # more tensors than the budget
]


@pytest.mark.parametrize("tensors", HOSTILE_TENSORS, ids=range(len(HOSTILE_TENSORS)))
def test_hostile_tensor_descriptions(tensors):
    with pytest.raises(protocol.ProtocolError):
        feed(message({"outputs": [], "tensors": tensors}, bytes(16)))


@pytest.mark.parametrize("raw", [
    '{"seconds": NaN, "tensors": []}', '{"seconds": Infinity, "tensors": []}', '{"seconds": -Infinity, "tensors": []}',
    '[' * 100000 + ']' * 100000, '{"a": ' + '[' * 40 + ']' * 40 + ', "tensors": []}', '"just a string"', "[]", "null",
    '{"x": 1' + "9" * 5000 + ', "tensors": []}', '\udcff', '{"tensors": []',
], ids=["nan", "inf", "-inf", "deep", "nested-40", "string", "list", "null", "huge-int", "bad-utf8", "unclosed"])
def test_hostile_headers(raw):
    data = message(raw) if raw != "\udcff" else struct.pack("!IQ", 2, 0) + b"\xff\xfe"
    with pytest.raises(protocol.ProtocolError):
        feed(data, protocol.Budget(header=1 << 20))


def test_sizes_are_refused_before_anything_is_allocated():
    """A message announcing 1 GiB of tensors (or a 1 GiB header) is refused from its first 12 bytes."""
    tracemalloc.start()
    try:
        for head in (struct.pack("!IQ", 2, 1 << 30), struct.pack("!IQ", 1 << 30, 0), struct.pack("!IQ", 2, 1 << 62)):
            with pytest.raises(protocol.ProtocolError, match="more than"):
                feed(head + b"{}" + bytes(1 << 16), close=False)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20, peak


def test_the_budget_bounds_what_a_valid_message_may_carry():
    data = valid()
    with pytest.raises(protocol.ProtocolError):
        feed(data, protocol.Budget(header=1 << 16, tensors=2, nbytes=1 << 16))  # three tensors
    with pytest.raises(protocol.ProtocolError):
        feed(data, protocol.Budget(header=1 << 16, tensors=8, nbytes=64))  # more bytes


def _random_json(rng: random.Random, depth: int = 0):
    kinds = ["int", "float", "str", "bool", "null", "list", "dict", "big", "neg"] if depth < 5 else ["int", "str", "null"]
    k = rng.choice(kinds)
    return {"int": lambda: rng.randrange(-3, 10), "float": lambda: rng.uniform(-1e9, 1e9), "str": lambda: "x" * rng.randrange(5),
            "bool": lambda: rng.random() < 0.5, "null": lambda: None, "big": lambda: 10 ** 400, "neg": lambda: -1,
            "list": lambda: [_random_json(rng, depth + 1) for _ in range(rng.randrange(4))],
            "dict": lambda: {rng.choice(["T", "L", "X", "device", "seconds", "kind", "0", "a"]): _random_json(rng, depth + 1)
                             for _ in range(rng.randrange(4))}}[k]()


def test_replies_with_wrong_types_are_refused_field_by_field():
    """clean_reply (what the judge reads) accepts a well-typed reply and refuses anything else with a
    ProtocolError, never another exception."""
    rng = random.Random(7)
    fields = ["seconds", "largest", "largest_shape", "error", "outputs", "input_grads", "param_grads"]
    ok = {"seconds": 0.5, "largest": 10, "largest_shape": [2, 5], "outputs": [{"T": 0}], "input_grads": {"0": None},
          "param_grads": {}}
    assert clean_reply(ok)["outputs"] == [{"T": 0}]
    for _ in range(2000):
        reply = dict(ok)
        for f in rng.sample(fields, rng.randrange(1, 4)):
            reply[f] = _random_json(rng)
        try:
            out = clean_reply(reply)
        except protocol.ProtocolError:
            continue
        assert isinstance(out["seconds"], float) and isinstance(out["largest"], int)


def test_notes_are_checked_and_bounded():
    notes = protocol.Notes()
    notes.add({"ready": {"confined": {"filesystem": True}}}, first=True)
    notes.add({"ready": {"confined": {"filesystem": False}}}, first=False)  # a later "ready" is a forgery
    notes.add({"forbidden": "x" * 1000}, first=False)
    notes.add({"too_large": 10, "shape": "nope"}, first=False)
    assert notes.ready == {"confined": {"filesystem": True}}
    assert notes.forbidden == ["x" * 200] and notes.too_large == (10, [])
    with pytest.raises(protocol.ProtocolError):
        for _ in range(protocol.MAX_NOTES):
            notes.add({}, first=False)
    with pytest.raises(protocol.ProtocolError):
        protocol.Notes().add([], first=True)


def test_judging_any_reply_yields_a_verdict(catalog):
    """Every reply the judge can receive, however odd, ends as a case verdict (mostly crashed), never an
    exception; the well-formed correct one is accepted."""
    from torchcode.grader.problem import Problem
    from torchcode.grader.result import Verdict
    from torchcode.grader.verdict import judge_case

    spec = catalog.get("sdpa")
    problem = Problem(spec)
    prep = problem.prepare(problem.cases[0], seed=3)
    gold = prep.ref.outputs[0]
    tensors = [gold.clone(), torch.zeros(3), torch.zeros(gold.shape, dtype=torch.float64)]
    tensors += [g.clone() for g in prep.ref.input_grads.values()]
    grads = {str(i): {"T": 3 + i} for i in range(len(prep.ref.input_grads))}
    good = {"seconds": 0.1, "largest": 1, "largest_shape": [1], "outputs": [{"T": 0, "device": "cpu"}],
            "input_grads": grads, "param_grads": {}}
    assert judge_case(spec.grading, prep, good, tensors).verdict is Verdict.ACCEPTED
    rng = random.Random(11)
    verdicts = set()
    for _ in range(1500):
        reply = dict(good)
        for f in rng.sample(list(good) + ["error"], rng.randrange(1, 4)):
            reply[f] = _random_json(rng)
        notes = protocol.Notes()
        if rng.random() < 0.1:
            notes.add({"too_large": rng.randrange(1, 10**9), "shape": _random_json(rng)}, first=False)
        verdicts.add(judge_case(spec.grading, prep, reply, tensors, notes).verdict)
    assert Verdict.CRASHED in verdicts

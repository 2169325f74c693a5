"""The in-process guards, in a fresh interpreter (their kernel bans change torch's dispatcher for good):
every way to a forbidden kernel is refused, on every thread; tampering with the guard is reported;
honest code is left alone."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent('''
    import json, os, sys, tempfile, threading, warnings
    import torch
    import torch.nn.functional as F
    from torchcode.grader import guards

    FORBIDDEN = [guards.SDPA, *guards.MHA, "torch.repeat_interleave", "torch.Tensor.repeat_interleave"]
    notes = []
    guards.set_reporter(lambda **n: notes.append(n))
    guards.ban_kernels(FORBIDDEN)
    q4, q3 = torch.randn(1, 2, 5, 8, requires_grad=True), torch.randn(2, 5, 8)
    mha = torch.nn.MultiheadAttention(8, 2, batch_first=True).eval()
    x = torch.randn(1, 5, 8)
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write("import torch\\ndef rep(x: torch.Tensor) -> torch.Tensor:\\n    return x.repeat_interleave(2, 0)\\n")
    sys.path.insert(0, os.path.dirname(f.name))
    scripted = __import__(os.path.basename(f.name)[:-3])

    ROUTES = {
        "F.sdpa 4-D": lambda: F.scaled_dot_product_attention(q4, q4, q4),
        "F.sdpa 3-D": lambda: F.scaled_dot_product_attention(q3, q3, q3),
        "torch._C._nn.sdpa": lambda: torch._C._nn.scaled_dot_product_attention(q3, q3, q3),
        "aten sdpa packet 3-D": lambda: torch.ops.aten.scaled_dot_product_attention(q3, q3, q3),
        "aten sdpa default 4-D": lambda: torch.ops.aten.scaled_dot_product_attention.default(q4, q4, q4),
        "aten math fallback": lambda: torch.ops.aten._scaled_dot_product_attention_math(q3, q3, q3),
        "aten flash cpu": lambda: torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q4, q4, q4),
        "vmap sdpa": lambda: torch.vmap(lambda a: torch.ops.aten.scaled_dot_product_attention(a, a, a))(q4),
        "MHA fast path": lambda: mha(x, x, x, need_weights=False),
        "Tensor.repeat_interleave": lambda: q3.repeat_interleave(2, 0),
        "torch.repeat_interleave": lambda: torch.repeat_interleave(q3, 2, 0),
        "aten repeat_interleave.self_int": lambda: torch.ops.aten.repeat_interleave.self_int(q3, 2, 0),
        "aten repeat_interleave.Tensor": lambda: torch.ops.aten.repeat_interleave.Tensor(torch.tensor([1, 2])),
        "vmap repeat_interleave": lambda: torch.vmap(lambda a: a.repeat_interleave(2, 0))(q3),
        "TorchScript repeat_interleave": lambda: torch.jit.script(scripted.rep)(q3),
    }

    def outcome(fn):
        """'refused' when the kernel refused: ForbiddenCall raised, or (through TorchScript, which turns
        it into a RuntimeError) at least the note the trusted side judges by."""
        notes.clear()
        try:
            fn()
            return "ran"
        except guards.ForbiddenCall:
            return "refused"
        except Exception as e:
            return "refused" if any("forbidden" in n for n in notes) else type(e).__name__ + ": " + str(e)[:200]

    result = {"bare": {}, "thread": {}, "guarded": {}}
    for name, fn in ROUTES.items():
        result["bare"][name] = outcome(fn)  # no guard active: the kernel bans alone
        box = []
        t = threading.Thread(target=lambda: box.append(outcome(fn)))
        t.start(); t.join()
        result["thread"][name] = box[0]
    for name, fn in ROUTES.items():
        def guarded():
            with guards.Guard(FORBIDDEN):
                fn()
        result["guarded"][name] = outcome(guarded)

    def honest():
        with guards.Guard(FORBIDDEN, max_elements=10**9) as g:
            s = (q4 @ q4.transpose(-2, -1)).softmax(-1) @ q4
            s.sum().backward()
            class Mine(torch.overrides.TorchFunctionMode):
                def __torch_function__(self, func, types, args=(), kwargs=None):
                    return func(*args, **(kwargs or {}))
            with Mine():
                (q3 + 1).sum()
            print(torch.ones(2))
        return g
    g = honest()
    result["honest"] = {"violations": g.violations, "tampered": g.tampered, "largest": g.largest}

    from torch.utils import _python_dispatch
    tampering = {
        "pop function mode": lambda: torch._C._pop_torch_function_stack(),
        "pop dispatch mode": lambda: _python_dispatch._pop_mode(),
        "leave torch functions off": lambda: enter(torch._C.DisableTorchFunction()),
        "leave dispatch off": lambda: enter(torch._C._DisableTorchDispatch()),
        "destroy the kernel bans": lambda: guards._LIBRARY[0]._destroy(),
    }
    def enter(ctx):
        KEEP.append(ctx)
        ctx.__enter__()

    result["tamper"] = {}
    g = guards.Guard(FORBIDDEN)
    refused_by_torch = False
    with g:
        mine = torch.library.Library("aten", "IMPL")  # the learner's own kernel over the ban
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                mine.impl("scaled_dot_product_attention", lambda *a, **k: a[0], "CompositeImplicitAutograd")
            except RuntimeError as e:  # torch 2.11 itself refuses a second Python kernel over the guard's
                refused_by_torch = "already a kernel registered from python" in str(e)
                if not refused_by_torch:
                    raise
    g.check_kernels()
    result["tamper"]["override a ban"] = ["refused" if g.tampered or refused_by_torch else "ran",
                                          bool(g.tampered or refused_by_torch), True]
    mine._destroy()
    for name, fn in tampering.items():
        KEEP = []
        g = guards.Guard(FORBIDDEN)
        notes.clear()
        def call():
            g.__enter__()
            fn()  # the "learner's" call
            g.__exit__(None, None, None)
        result["tamper"][name] = [outcome(call), bool(g.tampered), [n for n in notes if "tamper" in n] != []]
        for ctx in KEEP:
            ctx.__exit__(None, None, None)
        while torch._C._len_torch_function_stack():
            torch._C._pop_torch_function_stack()
        while torch._C._len_torch_dispatch_stack():
            _python_dispatch._pop_mode()
    print("RESULT" + json.dumps(result))
''')


def test_every_route_to_a_forbidden_kernel_is_refused_and_tampering_is_reported():
    p = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300)
    line = next((ln for ln in p.stdout.splitlines() if ln.startswith("RESULT")), None)
    assert line, p.stdout[-2000:] + p.stderr[-3000:]
    result = json.loads(line[6:])
    for where in ("bare", "thread", "guarded"):
        ran = {k: v for k, v in result[where].items() if v != "refused"}
        assert not ran, (where, ran)
    assert result["honest"]["violations"] == [] and result["honest"]["tampered"] == "", result["honest"]
    assert result["honest"]["largest"] >= 50, result["honest"]
    for name, (how, tampered, noted) in result["tamper"].items():
        assert how == "refused" and tampered and noted, (name, how, tampered, noted)


def test_a_variable_named_like_an_escape_hatch_attribute_is_the_learners_own():
    """`gc.callbacks` and `from gc import callbacks` are refused by name; a local list called `callbacks` is not."""
    from torchcode.grader.hatches import scan_source

    assert scan_source("callbacks = []\nfor f in callbacks:\n    f()\n") == []
    assert [n for n, _, _ in scan_source("import gc\ngc.callbacks.append(print)\n")] == ["callbacks"]
    assert {n for n, _, _ in scan_source("from gc import callbacks\n")} == {"callbacks"}


def test_work_counts_a_scan_once_per_element_and_its_width_as_every_value():
    """A cumsum over S keys is S adds per column (a correct linear attention took Z as phi(K).cumsum(1)[:, -1] and
    was called quadratic), yet it combines all S keys into its last value (the lean rule still sees that)."""
    import torch

    from torchcode.grader import guards

    k = torch.randn(2, 512, 16)
    for op, work, widest in ((lambda: k.cumsum(1), k.numel(), 512),
                             (lambda: torch.sort(k, 1), k.numel() * (512).bit_length(), 512),
                             (lambda: torch.nn.functional.layer_norm(k, (16,)), k.numel(), 16),  # not 16 x numel
                             (lambda: k @ k.transpose(1, 2), 2 * 512 * 512 * 16, 16)):
        with guards.Guard([], measured=True) as g:
            op()
        assert (g.work, g.widest[0]) == (work, widest), (g.work, g.widest, work)

"""Would code that passes on the CPU also run on a GPU? A dry run on the ``meta`` device says.

A learner on a laptop writes ``torch.ones(S, S).tril()``: on the CPU every tensor is on the CPU and
the check passes; on a GPU the inputs are CUDA tensors and that mask is not, so the first operation
mixing them fails. The ``meta`` device behaves like a GPU here (only 0-dim CPU tensors may meet its
tensors) but holds no data and does no arithmetic, so the case program runs once more, on the worker,
with every input and weight on ``meta``, at almost no cost. Tensors the code makes on the CPU are
recorded with the line of the learner's file that made them.

Worker side: ``dry_run``. Trusted side: ``advice``, which turns the worker's report (line numbers and
a kind, nothing else is used) into a sentence; it never changes a verdict, so a forged report can at
most add or hide that sentence.
"""

from __future__ import annotations

import re
import sys

import torch
from torch.overrides import TorchFunctionMode

from torchcode.grader import execute

MAX_LINES = 8


class _CpuMade(TorchFunctionMode):
    """Records the learner's line for each tensor with a dim that an operation makes on the CPU."""

    def __init__(self, path: str, stage: execute.Stage):
        super().__init__()
        self.path, self.stage, self.lines = path, stage, []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if (isinstance(out, torch.Tensor) and out.device.type == "cpu" and out.dim() > 0 and len(self.lines) < MAX_LINES
                and not self.stage.name.startswith("in __init__")):  # weights made in __init__ move with .to()
            line = _learner_line(self.path)
            if line and line not in self.lines:
                self.lines.append(line)
        return out


def _learner_line(path: str) -> int:
    f = sys._getframe(2)
    while f is not None:
        if f.f_code.co_filename == path:
            return f.f_lineno
        f = f.f_back
    return 0


def warm() -> None:
    """Import what meta tensors need (torch._meta_registrations, torch._refs, dynamo's disable wrapper):
    seconds, paid once in the zygote. No thread is started and nothing is computed. No backward either: on a
    machine with a GPU, autograd's first backward asks CUDA how many devices there are (initialising it in
    the zygote, so that no worker forked from it could use CUDA) and starts a thread for each (after which a
    forked worker's backward fails)."""
    a = torch.ones(2, 3, 3, device="meta", requires_grad=True)
    mask = torch.ones(3, 3, dtype=torch.bool, device="meta")
    torch.where(mask, a.masked_fill(mask, 0.0), 0.0).softmax(-1).sum()


def is_device_error(e: BaseException) -> bool:
    text = str(e)
    return (isinstance(e, (RuntimeError, NotImplementedError, ValueError))
            and ("device" in text or "Cannot copy out of meta tensor" in text) and "meta" in text)


def dry_run(entry, is_module: bool, prog: execute.Program, path: str, guard, low: torch.dtype | None = None) -> dict:
    """Run ``prog`` with everything on ``meta``: {"kind": "clean" | "device" | "unknown", "made": [lines],
    "line": the learner's line where it failed}. "unknown": the code needs values (``.item()``, ``if
    x.any()``) or failed otherwise; nothing can be said then. With ``low`` (the inputs, weights included, in that
    low-precision dtype): "dtype" where two dtypes met in one operation, "dtype_output" where a floating-point
    output came back in another dtype than the inputs'."""
    stage = execute.Stage()
    made = _CpuMade(path, stage)
    try:
        with made:
            ex = execute.run(entry, is_module, prog, stage, guard_factory=lambda: guard, device="meta", dtype=low)
    except BaseException as e:  # noqa: BLE001 - the learner's code, on a device it never expected
        kind = "device" if is_device_error(e) else "dtype" if low is not None and is_dtype_error(e) else ""
        if not kind:
            return {"kind": "unknown"}
        tb = e.__traceback__
        line = 0
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == path:
                line = tb.tb_lineno
            tb = tb.tb_next
        return {"kind": kind, "made": made.lines, "line": line}
    for out in ex.outputs:
        for leaf in execute.flatten(out).values():
            if isinstance(leaf, torch.Tensor) and leaf.device.type != "meta":
                return {"kind": "output", "made": made.lines, "line": 0}
            if low is not None and isinstance(leaf, torch.Tensor) and leaf.is_floating_point() and leaf.dtype != low:
                return {"kind": "dtype_output", "made": [], "line": 0, "got": str(leaf.dtype).replace("torch.", "")}
    return {"kind": "clean"}


DTYPE_ERRORS = ("expected scalar type", "to have the same dtype", "expected both vectors to have same dtype",
                "must have the same dtype")


def is_dtype_error(e: BaseException) -> bool:
    return isinstance(e, RuntimeError) and any(s in str(e) for s in DTYPE_ERRORS)


def advice(reply: dict, source: str, first_param: str, low: str | None = None) -> str:
    """The sentence for a dry run's report ("" when there is nothing to say). Only ints, a kind and a dtype
    name among the known ones are taken from the reply; the code shown is read from the learner's own file here."""
    kind = reply.get("kind") if isinstance(reply, dict) else None
    if kind not in ("device", "output", "dtype", "dtype_output") or kind.startswith("dtype") != (low is not None):
        return ""  # (a run in a low dtype speaks of dtypes only: the device is the float32 runs' to say)
    lines = re.split(r"\r\n|\r|\n", source)  # Python's lines (str.splitlines also ends them at \f, \u2028...)

    def shown(n) -> str:
        if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= len(lines):
            return ""
        code = lines[n - 1].split("  #")[0].strip()
        return f"line {n} (`{code[:80]}{'...' if len(code) > 80 else ''}`)"

    numbers = reply.get("made") if isinstance(reply.get("made"), list) else []
    made = [s for s in map(shown, numbers[:MAX_LINES]) if s]
    failed = shown(reply.get("line"))
    fix = (f"Make such tensors where the inputs are: pass `device={first_param}.device` to torch.ones/zeros/arange/"
           f"full/tensor (or use `torch.ones_like`, `{first_param}.new_ones(...)`).")
    if kind.startswith("dtype"):
        got = reply.get("got") if reply.get("got") in ("float32", "float64", "float16", "bfloat16") else "another dtype"
        head = (f"Passes in float32, the CPU's default, but a GPU grades {low} too, and there ")
        how = (f"`torchcode check --dtype all` grades {low} and the problem's other dtypes on this CPU.")
        if kind == "dtype_output":
            return (head + f"a tensor it returns comes back in {got} where the inputs are {low}: outputs keep the "
                    f"inputs' dtype (cast back with `.to({first_param}.dtype)`). " + how)
        return (head + (f"{failed} " if failed else "it ") + "meets two dtypes in one operation: make tensors with "
                f"`dtype={first_param}.dtype` (or cast with `.to({first_param}.dtype)`). " + how)
    head = "Passes on the CPU, but would fail on a GPU, where the inputs are CUDA tensors: "
    if kind == "output":
        return head + "a tensor it returns is made on the CPU" + (f" ({made[0]})" if made else "") + ". " + fix
    if made:
        where = f"; it fails at {failed}" if failed and not failed.startswith(made[0].split(" (")[0] + " ") else ""
        return head + f"{made[0]} makes a tensor on the CPU{where}. " + fix
    return head + (f"{failed} uses a tensor that is on the CPU. " if failed else "it uses a tensor made on the CPU. ") + fix

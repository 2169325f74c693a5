"""Guards that watch the learner's code while it runs (inside the worker).

- Forbidden calls: a torch function mode sees every torch function however it was
  imported or aliased; a torch dispatch mode underneath sees the fused aten kernels
  (``torch.ops.aten...`` included). Layered, so one alias that skips a layer is
  still caught by the other.
- Escape hatches that switch those modes off, or reach into the grader, are found
  by reading the source (``scan_source``) before anything runs.
- Memory: the dispatch mode records the largest storage any op allocated, so a
  problem can forbid the full S x S score matrix.

Each finding is recorded here and reported to the trusted side; a learner who
catches our exception still gets the verdict.
"""

from __future__ import annotations

import ast
import importlib

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

# aten kernels behind a forbidden Python call (name prefixes after "aten.")
FUSED_ATEN = {
    "torch.nn.functional.scaled_dot_product_attention": ("_scaled_dot_product", "scaled_dot_product_attention"),
    "torch.nn.MultiheadAttention": ("_native_multi_head_attention",),
    "torch.nn.functional.multi_head_attention_forward": ("_native_multi_head_attention",),
}

# Names whose mere use in a submission means switching guards off or reading the grader.
ESCAPE_HATCHES = {
    "DisableTorchFunction": "switches off torch function modes (the grader's call guard)",
    "DisableTorchFunctionSubclass": "switches off torch function modes (the grader's call guard)",
    "_DisableTorchDispatch": "switches off torch dispatch modes (the grader's guards)",
    "_disabled_torch_function_impl": "switches off torch function handling",
    "_pop_mode": "removes the grader's guard modes",
    "_pop_torch_function_stack": "removes the grader's guard modes",
    "_pop_torch_dispatch_stack": "removes the grader's guard modes",
    "_unset_dispatch_mode": "removes the grader's guard modes",
    "_set_torch_function_mode": "replaces the grader's guard modes",
    "torchcode": "reaches into the grader and its reference solutions",
}


class ForbiddenCall(BaseException):
    """Raised into the learner's code; BaseException so ``except Exception`` does not hide it."""


class TooLarge(BaseException):
    pass


def resolve(dotted: str):
    """``"torch.nn.functional.scaled_dot_product_attention"`` -> the object, or None."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        try:
            for p in parts[i:]:
                obj = getattr(obj, p)
        except AttributeError:
            return None
        return obj
    return None


class Guard:
    """Context manager for one call of learner code. Findings accumulate on the instance."""

    def __init__(self, forbidden: list[str], max_elements: int | None = None):
        self.forbidden = forbidden
        self.by_id = {}
        self.classes = []
        for name in forbidden:
            obj = resolve(name)
            if isinstance(obj, type):
                self.classes.append((name, obj))
            elif obj is not None:
                self.by_id[id(obj)] = name
        self.aten = [(pre, name) for name in forbidden for pre in FUSED_ATEN.get(name, ())]
        self.max_elements = max_elements
        self.violations: list[str] = []
        self.largest = 0
        self.largest_bytes = 0
        self.largest_shape: list[int] = []
        self._modes = None

    # -- recording -----------------------------------------------------------------
    def forbid(self, name: str):
        if name not in self.violations:
            self.violations.append(name)
        raise ForbiddenCall(f"{name} is forbidden in this problem")

    def check_modules(self, module) -> None:
        for sub in module.modules():
            for name, cls in self.classes:
                if isinstance(sub, cls):
                    self.forbid(name)

    def _record(self, out, inputs=()) -> None:
        """Remember the largest *fresh* storage an op produced (views and in-place results share an input's)."""
        seen = {_storage_ptr(t) for t in inputs if isinstance(t, torch.Tensor)}
        for t in (out if isinstance(out, (tuple, list)) else (out,)):
            if isinstance(t, torch.Tensor) and t.layout == torch.strided and _storage_ptr(t) not in seen:
                try:
                    n = t.untyped_storage().nbytes() // max(t.element_size(), 1)
                except (RuntimeError, NotImplementedError):
                    n = t.numel()
                if n > self.largest:
                    self.largest, self.largest_shape = n, list(t.shape)
                self.largest_bytes = max(self.largest_bytes, n * t.element_size())

    # -- modes -----------------------------------------------------------------------
    def __enter__(self):
        self._modes = [_CallGuard(self), _KernelGuard(self)]
        for m in self._modes:
            m.__enter__()
        return self

    def __exit__(self, *exc):
        for m in reversed(self._modes):
            m.__exit__(None, None, None)
        self._modes = None
        return False


class _CallGuard(TorchFunctionMode):
    def __init__(self, guard: Guard):
        super().__init__()
        self.guard = guard

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = self.guard.by_id.get(id(func))
        if name is not None:
            self.guard.forbid(name)
        return func(*args, **(kwargs or {}))


class _KernelGuard(TorchDispatchMode):
    def __init__(self, guard: Guard):
        super().__init__()
        self.guard = guard

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False  # the default wraps us in torch._disable_dynamo: a one-second import of dynamo

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        guard = self.guard
        if guard.aten:
            op = func.overloadpacket.__name__ if hasattr(func, "overloadpacket") else str(func)
            for prefix, name in guard.aten:
                if op.startswith(prefix):
                    guard.forbid(name)
        out = func(*args, **(kwargs or {}))
        guard._record(out, tree_leaves((args, kwargs or {})))
        return out


def _storage_ptr(t: torch.Tensor) -> int:
    try:
        return t.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):
        return id(t)


def scan_source(source: str) -> list[tuple[str, int, str]]:
    """Escape hatches named in the source: (name, line, why). Needs parseable source."""
    found = []
    for node in ast.walk(ast.parse(source)):
        names = []
        if isinstance(node, ast.Name):
            names = [node.id]
        elif isinstance(node, ast.Attribute):
            names = [node.attr]
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            mods = [a.name for a in node.names] + ([node.module] if isinstance(node, ast.ImportFrom) and node.module else [])
            names = [m.split(".")[0] for m in mods] + [a.name for a in node.names]
        for n in names:
            if n in ESCAPE_HATCHES:
                found.append((n, getattr(node, "lineno", 0), ESCAPE_HATCHES[n]))
    return found

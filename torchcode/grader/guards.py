"""Guards that watch the learner's code while it runs (inside the worker).

- Forbidden calls, in layers: the aten kernels behind each forbidden name (every overload,
  composite ones like ``aten.scaled_dot_product_attention`` and ``aten.repeat_interleave``
  included) are replaced, in the worker only, by kernels that refuse (``ban_kernels``): that
  holds on every thread and for every way in (aliases, ``torch.ops``, TorchScript, vmap). On
  top, a torch function mode sees every torch function and ``torch.ops`` call however it was
  imported or aliased, and a torch dispatch mode underneath sees the aten kernels.
- Escape hatches that switch those modes off, or reach into the grader, are found by reading
  the source (``scan_source``) before anything runs; after each call the guard checks that its
  modes and kernels are still in place (a change is reported as tampering).
- Memory: the dispatch mode records the largest storage any op allocated, so a problem can
  forbid the full S x S score matrix.
- Work: the dispatch mode counts arithmetic (multiply-adds of matrix products, elements read by
  reductions, elements written by pointwise ops), so a problem can bound how work grows with S;
  and it records the widest reduction (the most values one op combines into one result, e.g. a
  softmax over every key at once).

Each finding is sent to the trusted side at once (``report``), where the learner's code can no
longer take it back; a learner who catches our exception still gets the verdict.
"""

from __future__ import annotations

import ast
import functools
import importlib
import warnings

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

SDPA = "torch.nn.functional.scaled_dot_product_attention"
MHA = ("torch.nn.MultiheadAttention", "torch.nn.functional.multi_head_attention_forward")
# aten kernels behind a forbidden Python call (name prefixes after "aten::"), besides the op
# named like the call itself (torch.repeat_interleave -> aten::repeat_interleave.*)
FUSED_ATEN = {
    SDPA: ("scaled_dot_product_attention", "_scaled_dot_product_", "_flash_attention_", "_efficient_attention_",
           "_cudnn_attention_", "_triton_scaled_dot_attention"),
    **{name: ("_native_multi_head_attention", "_triton_multi_head_attention", "_transformer_encoder_layer_fwd")
       for name in MHA},
}
# Dispatch keys whose kernels are replaced (where the op has one): composite kernels, vmap's
# decompositions and rules, the backends and autograd.
BAN_KEYS = ("CompositeImplicitAutograd", "FuncTorchBatchedDecomposition", "FuncTorchVmapMode", "FuncTorchBatched",
            "CompositeExplicitAutograd",
            "CompositeExplicitAutogradNonFunctional", "Autograd", "CPU", "CUDA", "NestedTensorCPU",
            "NestedTensorCUDA", "AutogradNestedTensor")

# Names whose mere use in a submission means switching guards off or reading the grader.
_OFF = "switches off torch function modes (the grader's call guard)"
_POP = "removes or replaces the grader's guard modes"
_DISPATCH = "switches off torch dispatch modes (the grader's guards)"
_FRAMES = "reaches into the grader's frames or memory"
ESCAPE_HATCHES = {
    "DisableTorchFunction": _OFF,
    "DisableTorchFunctionSubclass": _OFF,
    "_disabled_torch_function_impl": "switches off torch function handling",
    "_DisableTorchDispatch": _DISPATCH,
    "_ExcludeDispatchKeyGuard": _DISPATCH,
    "_disable_current_modes": _DISPATCH,
    "_pop_mode": _POP,
    "_pop_mode_temporarily": _POP,
    "_pop_torch_function_stack": _POP,
    "_pop_torch_dispatch_stack": _POP,
    "_unset_dispatch_mode": _POP,
    "_set_torch_function_mode": _POP,
    "_destroy": "removes the grader's kernel guards",
    "_getframe": _FRAMES,
    "currentframe": _FRAMES,
    "f_back": _FRAMES,
    "f_globals": _FRAMES,
    "f_locals": _FRAMES,
    "tb_frame": _FRAMES,
    "get_objects": _FRAMES,
    "get_referrers": _FRAMES,
    "get_referents": _FRAMES,
    "torchcode": "reaches into the grader and its reference solutions",
}


# matrix products: work = output elements x the contracted size
_MATMUL = {"mm", "bmm", "addmm", "baddbmm", "addbmm", "mv", "addmv", "dot", "vdot"}
_SOFTMAX = {"_softmax", "_log_softmax", "_safe_softmax", "softmax", "log_softmax"}


class ForbiddenCall(BaseException):
    """Raised into the learner's code; BaseException so ``except Exception`` does not hide it."""


class TooLarge(BaseException):
    pass


_ACTIVE: list["Guard"] = []  # the guard of the call running now (one thread: the worker allows no other)
_REPORT = [lambda **note: None]  # sends a note to the trusted side (set by the worker)
_BANNED: dict[str, list[str]] = {}  # "aten::op.overload" -> the dispatch keys whose kernel refuses
_LIBRARY: list = []


def set_reporter(report) -> None:
    _REPORT[0] = report


def _violation(name: str):
    if _ACTIVE:
        _ACTIVE[-1].forbid(name)  # records, reports, raises
    _REPORT[0](forbidden=name)
    raise ForbiddenCall(f"{name} is forbidden in this problem")


@functools.lru_cache(maxsize=None)
def _aten_index() -> dict[str, tuple[str, ...]]:
    """aten operator base name -> its overloads ("aten::x.y"), from the dispatcher's registry."""
    try:
        names = torch._C._dispatch_get_all_op_names()
    except (AttributeError, RuntimeError):
        return {}
    index: dict[str, list[str]] = {}
    for op in names:
        if op.startswith("aten::"):
            index.setdefault(op[6:].split(".")[0], []).append(op)
    return {k: tuple(sorted(v)) for k, v in index.items()}


@functools.lru_cache(maxsize=None)
def aten_ops(name: str) -> tuple[str, ...]:
    """Every aten operator overload behind the forbidden Python name ``name``."""
    index = _aten_index()
    last, prefixes = name.rsplit(".", 1)[-1], FUSED_ATEN.get(name, ())
    return tuple(op for base, ops in sorted(index.items()) if base == last or (prefixes and base.startswith(prefixes))
                 for op in ops)


@functools.lru_cache(maxsize=None)
def _kernel_keys(op: str) -> tuple[str, ...]:
    keys = []
    for key in BAN_KEYS:
        try:
            if torch._C._dispatch_has_kernel_for_dispatch_key(op, key):
                keys.append(key)
        except (RuntimeError, AttributeError):
            pass
    return tuple(keys)


def warm() -> None:
    """Fill the caches above (in the zygote, so that every worker inherits them)."""
    for name in FUSED_ATEN:
        for op in aten_ops(name):
            _kernel_keys(op)


def ban_kernels(forbidden: list[str]) -> int:
    """Replace, in this process, every kernel behind the forbidden names by one that refuses.

    Only ever called in the worker (the reference runs elsewhere). Returns how many kernels."""
    ops = {}
    for name in forbidden:
        for op in aten_ops(name):
            ops.setdefault(op, name)
    if not ops:
        return 0
    try:
        lib = torch.library.Library("aten", "IMPL")
    except (AttributeError, RuntimeError):
        return 0
    _LIBRARY.append(lib)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "overriding a previously registered kernel": that is the point
        for op, name in ops.items():
            for key in _kernel_keys(op):
                try:
                    lib.impl(op[6:], _refuse(name), key)
                except (RuntimeError, ValueError):
                    continue
                _BANNED.setdefault(op, []).append(key)
    return sum(map(len, _BANNED.values()))


def _refuse(name: str):
    def kernel(*args, **kwargs):
        _violation(name)

    return kernel


def _kernels_intact() -> bool:
    """Our refusing kernels are still the ones the dispatcher runs."""
    if not _BANNED:
        return True
    if not _LIBRARY or getattr(_LIBRARY[0], "m", None) is None:
        return False
    mine = "registered at " + __file__.rsplit(".", 1)[0]
    for op, keys in _BANNED.items():
        try:
            lines = torch._C._dispatch_dump(op).splitlines()
        except RuntimeError:
            return False
        for key in keys:
            active = next((ln for ln in lines if ln.startswith((key + ":", key + "[alias]:"))), "")
            if mine not in active:
                return False
    return True


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


@functools.lru_cache(maxsize=8)
def _ops_of(forbidden: tuple[str, ...]) -> dict[str, str]:
    """aten op names, with and without overload ("aten::x.y" and "aten::x"), -> forbidden name."""
    out = {}
    for name in forbidden:
        for op in aten_ops(name):
            out[op] = name
            out[op.split(".")[0]] = name
    return out


class Guard:
    """Context manager for one call of learner code. Findings accumulate on the instance and are
    reported (``report``) as they happen."""

    def __init__(self, forbidden: list[str], max_elements: int | None = None, measured: bool = False):
        self.forbidden = forbidden
        self.measured = measured  # the case bounds memory or work: tensor data may not leave torch (EXPORTS)
        self.scalars = 0  # elements taken out of torch one by one (item(), float(t), ...) during this call
        self.measuring = False  # the kernel guard is looking at an op's tensors (torch function modes may see it)
        self.by_id = {}
        self.classes = []
        for name in forbidden:
            obj = resolve(name)
            if isinstance(obj, type):
                self.classes.append((name, obj))
            elif obj is not None:
                self.by_id[id(obj)] = name
        self.ops = _ops_of(tuple(forbidden))
        self.max_elements = max_elements
        self.violations: list[str] = []
        self.tampered = ""
        self.largest = 0
        self.largest_bytes = 0
        self.largest_shape: list[int] = []
        self.work = 0  # arithmetic so far, see _count
        self.widest: list = [0, "", []]  # the widest reduction: values combined, aten op, input shape
        self._modes = None
        self._depth = (0, 0)

    # -- recording -----------------------------------------------------------------
    def forbid(self, name: str):
        if name not in self.violations:
            self.violations.append(name)
            _REPORT[0](forbidden=name)
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
                    if self.max_elements is not None and self.largest < self.max_elements <= n:
                        _REPORT[0](too_large=n, shape=list(t.shape))
                    self.largest, self.largest_shape = n, list(t.shape)
                self.largest_bytes = max(self.largest_bytes, n * t.element_size())

    def _count(self, func, args, kwargs, out) -> None:
        """Add an op's arithmetic to ``work`` and remember the widest reduction (float inputs only)."""
        name = getattr(getattr(func, "overloadpacket", None), "__name__", "")
        tags = getattr(func, "tags", ())
        first = args[0] if args and isinstance(args[0], torch.Tensor) else None
        if name in _MATMUL:
            a = args[1] if name.startswith("add") or name == "baddbmm" else args[0]
            inner = a.shape[-1] if isinstance(a, torch.Tensor) and a.dim() else 1
            n = sum(t.numel() for t in _tensors(out))
            self.work += n * inner
            self._widest(inner, name, a)
        elif first is not None and (name in _SOFTMAX or torch.Tag.reduction in tags):
            self.work += first.numel()
            dim = args[1] if len(args) > 1 else (kwargs or {}).get("dim")
            dims = [dim] if isinstance(dim, int) else list(dim) if isinstance(dim, (list, tuple)) else []
            if dims and first.is_floating_point() and first.dim():
                extent = 1
                for d in dims:
                    extent *= first.shape[d]
                self._widest(extent, name, first)
        elif torch.Tag.pointwise in tags:
            self.work += max((t.numel() for t in _tensors(out)), default=0)

    def _widest(self, extent: int, name: str, t) -> None:
        if extent > self.widest[0]:
            self.widest = [int(extent), name, list(getattr(t, "shape", []))]

    # -- modes -----------------------------------------------------------------------
    def __enter__(self):
        self._modes = [_CallGuard(self), _KernelGuard(self)]
        for m in self._modes:
            m.__enter__()
        self._depth = _stack_depths()
        _ACTIVE.append(self)
        return self

    def __exit__(self, *exc):
        why = self._tampering()
        if _ACTIVE and _ACTIVE[-1] is self:
            _ACTIVE.pop()
        for m in reversed(self._modes):
            try:
                m.__exit__(None, None, None)
            except Exception:  # noqa: BLE001 - a tampered stack: the verdict says so below
                why = why or "the grader's guard modes were removed"
        self._modes = None
        if why:
            self.tampered = why
            _REPORT[0](tamper=why)
            raise ForbiddenCall(why)
        return False

    def _tampering(self) -> str:
        """Why the guard is no longer what it was when the call began ('' if intact)."""
        C = torch._C
        try:
            if not C._is_torch_function_enabled():
                return "torch function handling was left switched off"
            if _stack_depths() != self._depth:
                return "the grader's guard modes were removed or replaced"
            if C._get_function_stack_at(self._depth[0] - 1) is not self._modes[0]:
                return "the grader's call guard was replaced"
            if C._get_dispatch_stack_at(self._depth[1] - 1) is not self._modes[1]:
                return "the grader's kernel guard was replaced"
            if C._dispatch_tls_is_dispatch_key_excluded(C.DispatchKey.Python):
                return "torch dispatch modes were left switched off"
        except (AttributeError, RuntimeError, IndexError):
            pass  # an older torch without these introspection functions
        if _BANNED and (not _LIBRARY or getattr(_LIBRARY[0], "m", None) is None):
            return "the forbidden kernels were restored"
        return ""

    def check_kernels(self) -> None:
        """The thorough check of the kernel bans (a few ms: once per case, not per call)."""
        if not self.tampered and not _kernels_intact():
            self.tampered = "the forbidden kernels were restored"
            _REPORT[0](tamper=self.tampered)


def _stack_depths() -> tuple[int, int]:
    try:
        return torch._C._len_torch_function_stack(), torch._C._len_torch_dispatch_stack()
    except AttributeError:
        return (0, 0)


class _CallGuard(TorchFunctionMode):
    def __init__(self, guard: Guard):
        super().__init__()
        self.guard = guard

    def __torch_function__(self, func, types, args=(), kwargs=None):
        guard = self.guard
        name = guard.by_id.get(id(func))
        if name is None and isinstance(func, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
            name = guard.ops.get(_op_name(func))
        if name is None and guard.measured and not guard.measuring:
            name = _leaves_torch(guard, func, args)
        if name is not None:
            guard.forbid(name)
        return func(*args, **(kwargs or {}))


# Where a case measures memory and work (the largest intermediate, how work grows, the widest reduction),
# only torch's own ops are measured: the same computation in numpy or in Python lists would go unseen. So
# there, tensor data may not leave torch in bulk; a few scalars (a loop bound, a debug value) may.
EXPORTS = {"numpy", "__array__", "tolist", "__dlpack__", "untyped_storage", "_typed_storage", "storage",
           "data_ptr", "const_data_ptr", "__reduce_ex__", "__reduce__", "__getstate__", "__array_wrap__"}
# The same ways out that are plain functions, which torch function modes never see: wrapped in the worker.
EXPORT_FUNCTIONS = (("torch.utils.dlpack", "to_dlpack"), ("torch._C", "_to_dlpack"), ("torch._C", "_to_dlpack_versioned"),
                    ("torch._C", "_pickle_save"))
SCALARS = {"item", "__float__", "__int__", "__index__", "__complex__", "__bool__"}
MAX_SCALARS = 256  # per call: a few loop bounds or checks, not the inputs
_LEAVING = "tensor data taken out of torch, where this case measures memory and work: compute with torch ops"


def watch_exports() -> None:
    """Wrap EXPORT_FUNCTIONS (worker only): inside a measuring guard, calling one is a forbidden call."""
    for module, name in EXPORT_FUNCTIONS:
        try:
            mod = importlib.import_module(module)
            fn = getattr(mod, name)
        except (ImportError, AttributeError):
            continue
        if getattr(fn, "__torchcode_watched__", False):
            continue

        def watched(*args, __fn=fn, __name=f"{module}.{name}", **kwargs):
            if _ACTIVE and _ACTIVE[-1].measured:
                _ACTIVE[-1].forbid(f"{__name} ({_LEAVING})")
            return __fn(*args, **kwargs)

        watched.__torchcode_watched__ = True
        setattr(mod, name, watched)


def _leaves_torch(guard: Guard, func, args) -> str | None:
    qual = getattr(func, "__qualname__", "")
    owner, _, name = qual.rpartition(".")
    if owner not in ("Tensor", "TensorBase", "_TensorBase"):
        return None
    if name in EXPORTS:
        return f"Tensor.{name} ({_LEAVING})"
    if name in SCALARS:
        guard.scalars += 1
        if guard.scalars > MAX_SCALARS:
            return f"Tensor.{name} on more than {MAX_SCALARS} elements in one call ({_LEAVING})"
    return None


class _KernelGuard(TorchDispatchMode):
    def __init__(self, guard: Guard):
        super().__init__()
        self.guard = guard

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False  # the default wraps us in torch._disable_dynamo: a one-second import of dynamo

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        guard = self.guard
        if guard.ops:
            name = guard.ops.get(_op_name(func))
            if name is not None:
                guard.forbid(name)
        out = func(*args, **(kwargs or {}))
        guard.measuring = True  # its own look at the tensors (untyped_storage) is no export of the learner's
        try:
            guard._record(out, _tensors(args, kwargs))
            guard._count(func, args, kwargs, out)
        finally:
            guard.measuring = False
        return out


def _tensors(*trees) -> list[torch.Tensor]:
    """The tensors in an op's arguments or results (tuples, lists and dicts of them; pytree's general
    walk costs a third of a small case's time under the guard)."""
    found, todo = [], list(trees)
    while todo:
        v = todo.pop()
        if isinstance(v, torch.Tensor):
            found.append(v)
        elif isinstance(v, (tuple, list)):
            todo.extend(v)
        elif isinstance(v, dict):
            todo.extend(v.values())
    return found


def _op_name(func) -> str:
    """'aten::x.overload' for an OpOverload, 'aten::x' for a packet."""
    try:
        return func.name() if isinstance(func, torch._ops.OpOverload) else func._qualified_op_name
    except AttributeError:
        return ""


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

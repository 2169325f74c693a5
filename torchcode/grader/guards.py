"""Guards that watch the learner's code while it runs (inside the worker).

- Forbidden calls, in layers: the aten kernels behind each forbidden name (every overload,
  composite ones like ``aten.scaled_dot_product_attention`` and ``aten.repeat_interleave``
  included) are replaced, in the worker only, by kernels that refuse (``ban_kernels``): that
  holds on every thread and for every way in (aliases, ``torch.ops``, TorchScript, vmap). On
  top, a torch function mode sees every torch function and ``torch.ops`` call however it was
  imported or aliased, and a torch dispatch mode underneath sees the aten kernels.
- After each call the guard checks that its modes and kernels are still in place (a change is
  reported as tampering). The ways to switch them off before that are closed in ``hatches``.
- Memory: the dispatch mode records the largest storage any op allocated, so a problem can
  forbid the full S x S score matrix.
- Work: the dispatch mode counts arithmetic (multiply-adds of matrix products, elements read by
  reductions, elements written by pointwise ops), so a problem can bound how work grows with S;
  and it records the widest reduction (the most values one op combines into one result, e.g. a
  softmax over every key at once). What each op costs is ``opcount``'s.

Each finding is sent to the trusted side at once (``report``), where the learner's code can no
longer take it back; a learner who catches our exception still gets the verdict.
"""

from __future__ import annotations

from builtins import getattr  # the real one, before the worker replaces the builtin (reflection.py): per op
import functools
import gc
import importlib
import warnings
import weakref
from sys import getprofile as _getprofile, setprofile as _setprofile  # the real ones (the worker wraps sys's)

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from torchcode.grader import opcount

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
            dump = torch._C._dispatch_dump(op)
        except RuntimeError:
            return False
        if _INTACT.get(op) == dump:  # the very table found intact before
            continue
        lines = dump.splitlines()
        for key in keys:
            active = next((ln for ln in lines if ln.startswith((key + ":", key + "[alias]:"))), "")
            if mine not in active:
                return False
        _INTACT[op] = dump
    return True


_INTACT: dict[str, str] = {}  # op -> its dispatch table as last found intact (reading it again costs the most)


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

    def __init__(self, forbidden: list[str], max_elements: int | None = None, measured: bool = False,
                 counting: bool = True):
        self.forbidden = forbidden
        self.measured = measured  # the case bounds memory or work: tensor data may not leave torch (EXPORTS)
        # the largest tensor, the widest reduction and the work are recorded (a case that bounds none of them need
        # not: a third of the guard's time per op, in a case of many small ops)
        self.counting = counting or measured or max_elements is not None
        self.scalars = 0  # elements taken out of torch one by one (item(), float(t), ...) during this call
        self.branches = 0  # truth values taken (if t.any(): ...), a bit each: counted apart, with more room
        self.measuring = False  # the kernel guard is looking at an op's tensors (torch function modes may see it)
        self.handling = 0  # the kernel guard's handler is running (torch's own calls there may reach the call guard)
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
        self._collecting = False

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

    def _record(self, out, inputs=(), written=()) -> None:
        """Remember the largest storage an op produced: a fresh one, or one it wrote into (in place, ``out=``),
        which may have been made before the call (a view of an input's storage is no new memory)."""
        seen = mine = None  # the storages of the inputs and of what it wrote into, looked up only for a tensor
        for t in [*(out if isinstance(out, (tuple, list)) else (out,)), *written]:  # that would set a new largest
            if isinstance(t, torch.Tensor) and t.layout == torch.strided:
                try:
                    n = t.untyped_storage().nbytes() // max(t.element_size(), 1)
                except (RuntimeError, NotImplementedError):
                    n = t.numel()
                if n <= self.largest and n * t.element_size() <= self.largest_bytes:
                    continue  # fresh or not, it changes nothing
                if seen is None:
                    seen = {opcount.storage_ptr(i) for i in inputs if isinstance(i, torch.Tensor)}
                    mine = {opcount.storage_ptr(w) for w in written}
                if opcount.storage_ptr(t) in seen and opcount.storage_ptr(t) not in mine:
                    continue
                if n > self.largest:
                    shape = list(t.shape) if n == t.numel() else [n]  # a buffer written in part: all of it
                    if self.max_elements is not None and self.largest < self.max_elements <= n:
                        _REPORT[0](too_large=n, shape=shape)
                    self.largest, self.largest_shape = n, shape
                self.largest_bytes = max(self.largest_bytes, n * t.element_size())

    def _count(self, func, args, kwargs, out) -> None:
        """Add an op's arithmetic to ``work`` and remember the widest reduction (float inputs only)."""
        name, matmul, reduction, pointwise = opcount.kind(func)
        first = args[0] if args and isinstance(args[0], torch.Tensor) else None
        if matmul:
            a = args[1] if name.startswith(("add", "_addmm")) or name == "baddbmm" else args[0]
            inner = a.shape[-1] if isinstance(a, torch.Tensor) and a.dim() else 1
            n = sum(t.numel() for t in opcount.tensors(out))
            self.work += n * inner
            self._widest(inner, name, a)
        elif first is not None and reduction:
            self.work += first.numel()
            dim = args[1] if len(args) > 1 else (kwargs or {}).get("dim")
            dims = [dim] if isinstance(dim, int) else list(dim) if isinstance(dim, (list, tuple)) else []
            if dims and first.is_floating_point() and first.dim():
                extent = 1
                for d in dims:
                    extent *= first.shape[d]
                self._widest(extent, name, first)
        elif pointwise:
            self.work += max((t.numel() for t in opcount.tensors(out)), default=0)
        elif first is not None:
            extent = opcount.extent(name, func, args, kwargs, first)
            if extent is not None:
                n = max((t.numel() for t in opcount.tensors(out)), default=0)
                self.work += opcount.combining_work(name, n, extent, first.numel())
                self._widest(extent, name, first)

    def _widest(self, extent: int, name: str, t) -> None:
        if extent > self.widest[0]:
            self.widest = [int(extent), name, list(getattr(t, "shape", []))]

    # -- modes -----------------------------------------------------------------------
    def __enter__(self):
        # No cyclic garbage collection during the call: it runs at any allocation, torch's own with the guard modes off
        # included (inside their handlers), and a finalizer of the learner's would run there unwatched
        self._collecting = gc.isenabled()
        gc.disable()
        _REARMED.clear()  # (nothing the learner's code left there by switching the hook off carries over)
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
        if gc.isenabled():
            why = why or "the garbage collector was switched back on (its finalizers run inside the guards' own handlers)"
        if self._collecting:
            gc.enable()
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
            if _FUNCTION_AT(self._depth[0] - 1) is not self._modes[0]:
                return "the grader's call guard was replaced"
            if _DISPATCH_AT(self._depth[1] - 1) is not self._modes[1]:
                return "the grader's kernel guard was replaced"
            if C._dispatch_tls_is_dispatch_key_excluded(C.DispatchKey.Python):
                return "torch dispatch modes were left switched off"
        except (AttributeError, RuntimeError, IndexError, TypeError):
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
            name = guard.ops.get(opcount.op_name(func))
        if name is None and guard.measured and not guard.measuring:
            name = _leaves_torch(guard, func, args) or _subclassed(func, args, kwargs) or _unwatched(guard, func)
        if name is not None:
            guard.forbid(name)
        return _watched_inside(func, args, kwargs)


# Where a case measures memory and work (the largest intermediate, how work grows, the widest reduction),
# only torch's own ops are measured: the same computation in numpy or in Python lists would go unseen. So
# there, tensor data may not leave torch in bulk; a few scalars (a loop bound, a debug value) may.
EXPORTS = {"numpy", "__array__", "tolist", "__dlpack__", "untyped_storage", "_typed_storage", "storage",
           "data_ptr", "const_data_ptr", "__reduce_ex__", "__reduce__", "__getstate__", "__array_wrap__",
           "apply_", "map_", "map2_"}  # the last three hand every element to a Python callable
# Tensor methods that run the learner's Python (a custom autograd Function's backward, hooks) while this guard's
# call mode is off the stack: refused where a case measures. torch.autograd.grad runs them watched.
CALLS_BACK = {"backward"}
# The same ways out that are plain functions, which torch function modes never see: wrapped in the worker.
EXPORT_FUNCTIONS = (("torch.utils.dlpack", "to_dlpack"), ("torch._C", "_to_dlpack"), ("torch._C", "_to_dlpack_versioned"),
                    ("torch._C", "_pickle_save"))
SCALARS = {"item", "__float__", "__int__", "__index__", "__complex__", "__bool__", "__contains__", "equal", "allclose",
           "is_nonzero"}
TEXT = {"__repr__", "__str__", "__format__"}  # each element the text shows counts as one scalar
MAX_SCALARS = 256  # per call: a few loop bounds or checks, not the inputs
# A truth value (``if (m_new > m).any():`` once per tile, as a flash kernel that rescales only when a max moved does)
# is one bit: 64 x 64 tiles of them carry less than the inputs of the smallest measured case, and compute nothing
BRANCHES = {"__bool__", "is_nonzero"}
MAX_BRANCHES = 4096
_LEAVING = "tensor data taken out of torch, where this case measures memory and work: compute with torch ops"


def _leaves_torch(guard: Guard, func, args) -> str | None:
    qual = getattr(func, "__qualname__", "")
    owner, _, name = qual.rpartition(".")
    if owner not in ("Tensor", "TensorBase", "_TensorBase") and not (owner == "" and name in SCALARS):
        return None
    if name in EXPORTS:
        return f"Tensor.{name} ({_LEAVING})"
    if name in CALLS_BACK and owner:
        return f"Tensor.{name} during the call (what it runs is not watched there: use torch.autograd.grad)"
    if name in BRANCHES:
        guard.branches += 1
        if guard.branches > MAX_BRANCHES:
            return f"Tensor.{name} more than {MAX_BRANCHES} times in one call ({_LEAVING})"
    elif name in SCALARS or name in TEXT:
        guard.scalars += _shown(args[0]) if name in TEXT and args else 1
        if guard.scalars > MAX_SCALARS and name in TEXT:  # printing while debugging, most likely: say what may be
            return (f"Tensor.{name} of more than {MAX_SCALARS} elements in one call (printed text takes tensor data "
                    f"out of torch where this case measures work: print a slice, t[..., :4], or t.shape)")
        if guard.scalars > MAX_SCALARS:
            return f"Tensor.{name} on more than {MAX_SCALARS} elements in one call ({_LEAVING})"
    return None


def _unwatched(guard: Guard, func) -> str | None:
    """A call made while the kernel guard is off the dispatch stack (and this one on its own): torch turns dispatch
    modes off while it builds a tensor subclass (``as_subclass``, ``_make_subclass``) and reads the class's
    ``__torch_dispatch__``, a descriptor of the learner's could compute there, and the garbage collector may run a
    finalizer at that moment. Nothing done there would be measured."""
    try:
        depth = torch._C._len_torch_dispatch_stack()
    except AttributeError:
        return None
    if depth >= guard._depth[1] or guard.handling:
        return None
    return (f"{getattr(func, '__name__', 'a torch function')} inside a tensor subclass's construction or a finalizer "
            f"({_UNSEEN} into those: use plain tensors)")


def _subclassed(func, args, kwargs) -> str | None:
    """A call on a tensor subclass: its ``__torch_function__`` runs next, with this mode off the stack (where it
    could take data out of torch unseen)."""
    for t in opcount.tensors(args, kwargs):
        if not _plain(type(t)):
            return (f"{getattr(func, '__name__', 'a torch function')} on a tensor subclass ({_type_name(type(t))}: "
                    f"{_UNSEEN} what it runs: use plain tensors)")
    return None


def _shown(t) -> int:
    """How many of a tensor's elements its text (repr, str, format) shows: all, or the edges when summarised."""
    if not isinstance(t, torch.Tensor):
        return 0
    if not _plain(type(t)):  # its numel() or shape would be the learner's Python, run here unguarded
        return MAX_SCALARS + 1
    try:
        opts = torch._tensor_str.PRINT_OPTS
        if t.numel() <= opts.threshold:
            return t.numel()
        return opcount.prod(min(n, 2 * opts.edgeitems) for n in t.shape)
    except Exception:  # noqa: BLE001 - whatever it shows, it shows at most every element
        return t.numel()


def keep_out_of_compilation() -> None:
    """Once torch._dynamo is loaded (the learner's file uses torch.compile), the dispatch guard runs outside
    compilation, as torch's default for a dispatch mode has it: torch.compile traced the guard's own frames,
    and reading their source (hidden by the sandbox) failed every compiled call."""
    if not _KernelGuard.__dict__.get("out_of_compilation"):
        _KernelGuard.__torch_dispatch__ = torch._disable_dynamo(_KernelGuard.__dict__["__torch_dispatch__"],
                                                                recursive=True)
        _KernelGuard.out_of_compilation = True


def buildable(cls: type) -> None:
    """Let one of torch's own tensor subclasses be built by its class's constructor while the guard watches
    (``torch.nn.attention.bias.causal_lower_right(S, T)`` builds ``CausalBias(...)``): under any dispatch mode that
    constructor fails ("Creating a new Tensor subclass CausalBias but the raw Tensor object is already associated
    to a python object of type Tensor"), so correct code failed for the grader's sake. It is built as a view of an
    empty tensor instead, with the guards still on (torch itself turns the dispatch guard off while it reads the class's
    ``__torch_dispatch__``: a call made then is refused where a case measures, see ``_unwatched``)."""
    if "__new__" in cls.__dict__:
        return

    def __new__(sub, *args, **kwargs):
        return torch.Tensor._make_subclass(sub, torch.empty(0))

    cls.__new__ = staticmethod(__new__)


class _KernelGuard(TorchDispatchMode):
    def __init__(self, guard: Guard):
        super().__init__()
        self.guard = guard

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False  # the default wraps us in torch._disable_dynamo: a one-second import of dynamo

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        guard = self.guard
        if not guard.counting:  # nothing measured: a few lines of ours, run with the tripwire as it is (switching it
            # off and on again for them cost two profile hooks, each an audited event, per op)
            if guard.ops:
                name = guard.ops.get(opcount.op_name(func))
                if name is not None:
                    guard.forbid(name)
            return _watched_inside(func, args, kwargs)
        guard.handling += 1  # this handler's own looks at the tensors (layout, shape) are no unwatched call
        paused = _pause_tripwire()  # (on when the call guard's handler runs a torch function): our own Python
        try:
            return self._handle(guard, func, args, kwargs)
        finally:
            guard.handling -= 1
            if paused:
                _resume_tripwire()

    @staticmethod
    def _handle(guard, func, args, kwargs):
        if guard.ops:
            name = guard.ops.get(opcount.op_name(func))
            if name is not None:
                guard.forbid(name)
        inputs = opcount.tensors(args, kwargs)
        if guard.measured:
            why = _unmeasurable(func, args, kwargs, inputs)
            if why:
                guard.forbid(why)
        out = _watched_inside(func, args, kwargs)
        outputs = opcount.tensors(out)
        if not all(_plain(type(t)) for t in outputs) or not all(_plain(type(t)) for t in inputs):
            # a subclass's methods and properties are the learner's Python: never call them here (they would run
            # inside this handler, with both guard modes off the stack). Nothing to measure where no case bounds.
            if guard.measured:
                guard.forbid(f"{opcount.op_name(func)} on a tensor subclass ({_UNSEEN} what it runs: use plain tensors)")
            return out
        guard.measuring = True  # its own look at the tensors (untyped_storage) is no export of the learner's
        try:
            if guard.measured:
                why = _unmeasurable(func, (), None, outputs)
                if why:
                    guard.forbid(why)
            guard._record(out, inputs, opcount.written(func, args, kwargs))
            guard._count(func, args, kwargs, out)
        finally:
            guard.measuring = False
        return out


_UNSEEN = "this case measures memory and work and cannot see"

# Whether Python that may run inside a guard's own handler is the learner's (hatches.learners_code: else torch's, the
# standard library's, the grader's): a torch op runs there with that guard's mode off the stack, and Python it calls
# back (a finalizer freed by the op, a weakref callback, an autograd hook, __index__ read by its argument parser)
# would run unwatched. None (not set): nothing is watched inside.
_LEARNERS_CODE: list = [None]


def set_trusted_code(learners_code) -> None:
    """The worker says which code is the learner's, by its file name (set once the learner's folders are known)."""
    _LEARNERS_CODE[0] = learners_code


# weakref.finalize calls the function it was given from the standard library's Python: a C function (torch.matmul
# with out=, a functools.partial of it) runs there without a frame of the learner's, so the finalizer's whole call
# runs with the guards put back
_FINALIZER = weakref.finalize.__call__.__code__


_TRIPWIRE = [False]  # the profile hook below is on (the grader's own Python runs with it off)


def _watched_inside(func, args, kwargs):
    """Run torch's ``func`` for a guard's handler, with a profile hook on (``_inside``) that puts the guards back on
    their stacks for any Python called there from outside the trusted folders (the learner's code, which would run
    where no guard sees it)."""
    if _LEARNERS_CODE[0] is None or _TRIPWIRE[0]:
        return func(*args, **(kwargs or {}))
    rearmed = len(_REARMED)  # (the learner's code torch called back further out, still running)
    _setprofile(_inside)
    _TRIPWIRE[0] = True
    try:
        return func(*args, **(kwargs or {}))
    finally:
        hook = _getprofile()
        _setprofile(None)
        _TRIPWIRE[0] = False
        if hook is not _inside or len(_REARMED) > rearmed:
            _unhooked(rearmed)


def _unhooked(rearmed: int) -> None:
    """The hook was switched off (or replaced) while the learner's code it watched ran: the modes it put back are
    taken off again, and that is tampering."""
    while len(_REARMED) > rearmed:
        _disarm()
    why = "the grader's hook inside torch's ops was switched off (a profile hook set or removed there)"
    guard = _ACTIVE[-1] if _ACTIVE else None
    if guard is not None:
        guard.tampered = guard.tampered or why
    _REPORT[0](tamper=why)
    raise ForbiddenCall(why)


def _pause_tripwire() -> bool:
    if not _TRIPWIRE[0]:
        return False
    _setprofile(None)
    _TRIPWIRE[0] = False
    return True


def _resume_tripwire() -> None:
    _setprofile(_inside)
    _TRIPWIRE[0] = True


# The guards' modes put back on their stacks while the learner's code that torch called back inside a handler runs
# (taken before the worker replaces torch's by functions that refuse the learner: reflection.py)
_FUNCTION_AT = getattr(torch._C, "_get_function_stack_at", None)
_DISPATCH_AT = getattr(torch._C, "_get_dispatch_stack_at", None)
_PUSH_CALLS, _POP_CALLS = torch._C._push_on_torch_function_stack, torch._C._pop_torch_function_stack
_PUSH_KERNELS, _POP_KERNELS = torch._C._push_on_torch_dispatch_stack, torch._C._pop_torch_dispatch_stack
_REARMED: list = []  # (frame, call mode put back, kernel mode put back)


def _inside(frame, event, arg):
    """The profile hook while torch runs an op for a guard's handler (that guard's mode off the stack): the learner's
    code torch calls back there (a saved-tensor hook, ``__index__`` of a size, a ``__del__`` or weakref callback as
    the op frees a storage, a generator closed there) runs with the guards' modes put back, watched and measured like
    the rest of the call, and so does a ``weakref.finalize`` callback (a C function, ``torch.matmul(..., out=)``,
    has no frame of its own)."""
    if event == "call":  # Python starts: torch's own, or the learner's called back (or a finalizer of theirs)
        code = frame.f_code  # (once: each read is an audit event, which the worker's audit hook hears)
        if code is _FINALIZER or _LEARNERS_CODE[0](code.co_filename):
            _rearm(frame)
    elif event == "return" and _REARMED and _REARMED[-1][0] is frame:
        _disarm()


def _rearm(frame) -> None:
    guard = _ACTIVE[-1] if _ACTIVE else None
    if guard is None or guard._modes is None:
        return
    C = torch._C
    calls, kernels = C._len_torch_function_stack() < guard._depth[0], C._len_torch_dispatch_stack() < guard._depth[1]
    if kernels:
        _PUSH_KERNELS(guard._modes[1])
    if calls:
        _PUSH_CALLS(guard._modes[0])
    _REARMED.append((frame, calls, kernels))


def _disarm() -> None:
    _, calls, kernels = _REARMED.pop()
    if calls:
        _POP_CALLS()
    if kernels:
        _POP_KERNELS(None)


def _unmeasurable(func, args, kwargs, tensors) -> str:
    """Why this op's work would escape the guard's measures ('' if it would not): a tensor subclass (its
    ``__torch_dispatch__`` or methods would run the learner's Python while the guard's modes are off the stack),
    torch's Python dispatcher or an operator of the learner's own (the same, for their kernels), sparse or nested
    tensors, or an op that combines values in a way the guard does not measure."""
    name = opcount.op_name(func)
    for t in tensors:
        if not _plain(type(t)):  # checked before anything of the tensor's own is looked at
            return f"{name} on a tensor subclass ({_type_name(type(t))}: {_UNSEEN} what it runs: use plain tensors)"
    if _python_dispatcher():
        return f"{name} under torch's Python dispatcher ({_UNSEEN} what the Python kernels it runs compute)"
    if getattr(func, "namespace", "aten") not in ("aten", "prims"):
        return f"{name} (an operator of your own: {_UNSEEN} inside its kernel)"
    for t in tensors:
        if t.layout != torch.strided or t.is_nested:
            kind = "nested" if t.is_nested else str(t.layout).replace("torch.", "")
            return f"{name} on a {kind} tensor ({_UNSEEN} into those: use dense tensors)"
    short = getattr(getattr(func, "overloadpacket", None), "__name__", "")
    if short.startswith(("sparse_", "_sparse_", "to_sparse", "_to_sparse", "_nested_", "nested_")):
        return f"{name} (sparse or nested tensors: {_UNSEEN} into those: use dense tensors)"
    if short and torch.Tag.reduction not in getattr(func, "tags", ()) and opcount.unmeasured(short, func, args, kwargs):
        return f"{name} ({_UNSEEN} how it combines values: use matrix products, sums, maxima)"
    return ""


def _plain(kind) -> bool:
    """By identity: comparing a type with == would run its metaclass's __eq__ (the learner's, in a handler)."""
    return kind is torch.Tensor or kind is torch.nn.Parameter


def _python_dispatcher() -> bool:
    """Whether torch's Python dispatcher is on (it runs Python kernels, ``py_impl``, with the modes off the stack)."""
    try:
        return torch._C._dispatch_tls_is_dispatch_key_included(torch._C.DispatchKey.PythonDispatcher)
    except (AttributeError, RuntimeError):
        return False


def _type_name(t) -> str:
    try:
        return str(type.__getattribute__(t, "__name__"))[:60]
    except Exception:  # noqa: BLE001 - a hostile metaclass
        return "a subclass"



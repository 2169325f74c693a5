"""What each aten op costs, as the guards measure it (inside the worker): how much arithmetic it does, how
many values it combines into one result, which tensors it reads and writes. ``guards.Guard`` calls these for
every op the learner's code runs, so they are table lookups where they can be."""

from __future__ import annotations

from builtins import getattr  # the real one, before the worker replaces the builtin (reflection.py): per op
import functools

import torch

# matrix products: work = output elements x the contracted size
_MATMUL = {"mm", "bmm", "addmm", "baddbmm", "addbmm", "mv", "addmv", "dot", "vdot", "_addmm_activation", "_int_mm",
           "_weight_int8pack_mm", "_weight_int4pack_mm", "_weight_int4pack_mm_for_cpu", "_scaled_mm"}
_OUTER = {"addr", "outer", "ger"}  # outer products: one multiply-add per element written
_SOFTMAX = {"_softmax", "_log_softmax", "_safe_softmax", "softmax", "log_softmax", "_masked_softmax"}
# Ops that combine many values into each result without being a matrix product, a softmax or a tagged
# reduction (convolutions, pooling, scans, sorting, distances, norms, losses, FFTs): measured by ``_extent``.
_SCANS = {"cumsum", "cumprod", "cummax", "cummin", "logcumsumexp", "_cummax_helper", "_cummin_helper",
          "_logcumsumexp"}
_SELECTS = {"sort", "argsort", "topk", "kthvalue", "median", "nanmedian", "mode", "msort"}
_PAIRWISE = {"_cdist_forward", "cdist", "_euclidean_dist", "_pdist_forward", "pdist", "dist"}
_NORMS = {"native_layer_norm", "native_group_norm", "native_batch_norm", "_native_batch_norm_legit",
          "_native_batch_norm_legit_no_training", "_fused_rms_norm", "rms_norm", "renorm"}
# Ops that combine values in ways these guards cannot measure (many-to-one scatters, bags, histograms, linear
# algebra): refused where a case bounds memory or work.
_UNMEASURED = {"scatter_add", "scatter_reduce", "index_add", "index_reduce", "_embedding_bag",
               "_embedding_bag_forward_only", "embedding_bag", "bincount", "histc", "histogram",
               "_histogramdd_from_bin_cts",
               "_histogramdd_from_bin_tensors", "_segment_reduce", "segment_reduce", "_trilinear", "trace",
               "triangular_solve", "cholesky_solve", "cholesky_inverse", "geqrf", "ormqr", "lu_unpack", "_lu_with_info",
               "inverse", "det", "logdet", "slogdet", "matrix_exp", "matrix_power", "pinverse", "kron", "lu_solve"}
_ACCUMULATE = {"index_put", "_index_put_impl_", "put", "index_put_", "put_"}  # many-to-one with accumulate=True


@functools.lru_cache(maxsize=None)
def _write_args(func) -> tuple[tuple[int, str], ...]:
    try:
        return tuple((i, a.name) for i, a in enumerate(func._schema.arguments)
                     if a.alias_info is not None and a.alias_info.is_write)
    except (AttributeError, RuntimeError):
        return ()


def written(func, args, kwargs) -> list[torch.Tensor]:
    """The tensors an op writes into (in place, ``out=``): their storages hold its result, fresh or not."""
    found = []
    for i, name in _write_args(func):
        v = kwargs.get(name) if kwargs and name in kwargs else (args[i] if i < len(args) else None)
        found.extend(tensors(v))
    return found


def arg(func, args, kwargs, name: str, default=None):
    """The argument ``name`` of an aten op's call, by its schema."""
    try:
        at = _arg_index(func)[name]
    except (KeyError, AttributeError, RuntimeError):
        return default
    if kwargs and name in kwargs:
        return kwargs[name]
    return args[at] if at < len(args) else default


@functools.lru_cache(maxsize=None)
def _arg_index(func) -> dict[str, int]:
    return {a.name: i for i, a in enumerate(func._schema.arguments)}


def _ints(v) -> list[int]:
    if isinstance(v, int):
        return [v]
    return [int(x) for x in v] if isinstance(v, (list, tuple)) else []


def prod(xs) -> int:
    out = 1
    for x in xs:
        out *= max(int(x), 1)
    return out


def extent(name: str, func, args, kwargs, first: torch.Tensor) -> int | None:
    """How many values each result of ``func`` combines, for the ops beyond matrix products, softmaxes and
    tagged reductions (None: it combines none, or is not one of them)."""
    if name in _SCANS or name in _SELECTS:
        dim = arg(func, args, kwargs, "dim")
        return first.shape[dim] if isinstance(dim, int) and first.dim() else first.numel()
    if "conv" in name:
        weight = arg(func, args, kwargs, "weight")
        if not isinstance(weight, torch.Tensor) or weight.dim() < 2:
            return None
        if name == "conv_tbc":  # weight (kernel, in, out)
            return weight.shape[0] * weight.shape[1]
        transposed = bool(arg(func, args, kwargs, "transposed", "transpose" in name))
        groups = max(int(arg(func, args, kwargs, "groups", 1) or 1), 1)
        return prod(weight.shape[2:]) * (weight.shape[0] // groups if transposed else weight.shape[1])
    if "pool" in name:
        kernel = _ints(arg(func, args, kwargs, "kernel_size"))
        if kernel:
            return prod(kernel)
        size = _ints(arg(func, args, kwargs, "output_size"))
        if size and first.dim() >= len(size):
            return prod(-(-first.shape[first.dim() - len(size) + i] // max(o, 1)) for i, o in enumerate(size))
        return first.numel()
    if name in _PAIRWISE:
        return first.shape[-1] if first.dim() else 1
    if name in _NORMS:
        shape = _ints(arg(func, args, kwargs, "normalized_shape"))
        return prod(shape) if shape else first.numel()
    if name.startswith("_fft_"):
        dims = _ints(arg(func, args, kwargs, "dim"))
        return prod(first.shape[d] for d in dims) if dims else first.numel()
    if "loss" in name or name in ("kl_div", "binary_cross_entropy", "binary_cross_entropy_with_logits"):
        return first.numel() if arg(func, args, kwargs, "reduction", 1) else None
    return None


def combining_work(name: str, results: int, extent: int, read: int) -> int:
    """The arithmetic of an op that combines ``extent`` values into each of its ``results`` (an ``extent``
    op above) reading ``read`` elements. A scan writes each prefix from the one before it (a cumsum over S keys is
    S adds, not S x S) and a norm reads each value a pass or two, a sort or selection costs about log2(extent)
    comparisons per element, and the others (convolutions, pooling, distances) combine ``extent`` values afresh
    for every result."""
    if name in _SCANS or name in _NORMS:  # a norm's statistics are a pass or two over what it reads
        return max(results, read)
    if name in _SELECTS:
        return read * max(int(extent).bit_length(), 1)
    return max(results * extent, read)


def unmeasured(name: str, func, args, kwargs) -> bool:
    if name in _UNMEASURED or name.startswith(("linalg_", "_linalg_")):
        return True
    return name in _ACCUMULATE and bool(arg(func, args, kwargs, "accumulate", False))


def tensors(*trees) -> list[torch.Tensor]:
    """The tensors in an op's arguments or results (tuples, lists and dicts of them; pytree's general
    walk costs a third of a small case's time under the guard)."""
    found, todo = [], list(trees)
    while todo:  # by their types, and their contents as the built-in containers hold them: never a container
        v = todo.pop()  # subclass's own __iter__ or __class__ (the learner's Python, run inside a guard's handler)
        kind = type(v)
        if issubclass(kind, torch.Tensor):
            found.append(v)
        elif issubclass(kind, tuple):
            todo.extend(tuple.__iter__(v))
        elif issubclass(kind, list):
            todo.extend(list.__iter__(v))
        elif issubclass(kind, dict):
            todo.extend(dict.values(v))
    return found


_KINDS: dict = {}  # op -> what _count does with it, looked up once per op (a third of the guard's time per op)


def kind(func) -> tuple[str, bool, bool, bool]:
    """An op's packet name, and whether it is a matrix product, a softmax or reduction, pointwise (or an outer
    product: one multiply-add per element written)."""
    kind = _KINDS.get(func)
    if kind is None:
        name = getattr(getattr(func, "overloadpacket", None), "__name__", "")
        tags = getattr(func, "tags", ())
        kind = (name, name in _MATMUL, name in _SOFTMAX or torch.Tag.reduction in tags,
                torch.Tag.pointwise in tags or name in _OUTER)
        if isinstance(func, torch._ops.OpOverload):  # torch's own, one object per op for the process's life
            _KINDS[func] = kind
    return kind


_NAMES: dict = {}  # OpOverload -> its name, asked once per op


def op_name(func) -> str:
    """'aten::x.overload' for an OpOverload, 'aten::x' for a packet."""
    name = _NAMES.get(func) if isinstance(func, torch._ops.OpOverload) else None
    if name is not None:
        return name
    try:
        if isinstance(func, torch._ops.OpOverload):
            name = _NAMES[func] = func.name()
            return name
        return func._qualified_op_name
    except AttributeError:
        return ""


def storage_ptr(t: torch.Tensor) -> int:
    try:
        return t.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):
        return id(t)

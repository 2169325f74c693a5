"""Numeric comparison with dtype-aware tolerances.

The expected value ``gold`` is the reference kernel run in float64 on the same
inputs. The reference run in the grading dtype (``ref``) measures how far an honest
implementation in that dtype lands from gold. A learner tensor passes when

    max |got - gold|  <=  factor * max |ref - gold|  +  floor * max |gold|  +  atol(dtype)

(PyTorch's SDPA tests and FlashAttention's tests use this shape of rule). The floor
is relative to the tensor's own scale, so returning zeros cannot pass when the
expected values are large against ``atol``; it covers the rounding noise of a
different but correct order of operations (at least ``ROUNDINGS`` machine epsilons
of the grading dtype: in float16 the reference's own error on one draw of inputs
can be far below what another correct order of operations makes). ``atol`` is a few units of rounding of
the grading dtype: it only matters where the expected tensor is exactly zero
(e.g. the gradient of a query that attends to a single key).
"""

from __future__ import annotations

import torch

from torchcode.grader.result import Mismatch

# torch.testing's float32 atol; per dtype, a few units of rounding at unit scale
ATOL = {torch.float64: 1e-12, torch.float32: 1e-5, torch.float16: 1e-3, torch.bfloat16: 1e-2}
# The floor is at least this many machine epsilons of the grading dtype (relative to the tensor's scale): a correct
# kernel that orders its operations otherwise (nine sequential merges where block_size = 1, say) lands several
# roundings away in float16 however accurate the reference happened to be on those inputs. Only matters below float32.
ROUNDINGS = 4


def atol_for(dtype: torch.dtype) -> float:
    return ATOL.get(dtype, 1e-6)


def compare(what: str, got: torch.Tensor, gold: torch.Tensor, ref: torch.Tensor, *,
            factor: float, floor: float, ignore: torch.Tensor | None = None,
            spread: torch.Tensor | None = None, dims: tuple[str, ...] = (), scale: float | None = None) -> Mismatch | None:
    """None when ``got`` is close enough to ``gold``; else where and how badly it differs.

    ``spread``: the reference on inputs nudged by a rounding unit (low precision); the reference's error
    is then the larger of its two errors. ``dims``: the names of the tensor's last dimensions, for the message
    ("query position", "feature"). ``scale``: the scale the relative floor applies to, where not the tensor's own
    largest element (a gradient that vanishes in exact arithmetic: the size of the terms that cancel in it)."""
    got64, gold64, ref64 = got.detach().double(), gold.detach().double(), ref.detach().double()
    keep = torch.ones_like(gold64, dtype=torch.bool)
    if ignore is not None:
        keep = ~ignore.to(torch.bool).expand_as(gold64)
    finite_gold = torch.isfinite(gold64)
    keep = keep & finite_gold
    zero = torch.zeros((), dtype=torch.float64)
    own = torch.where(keep, gold64.abs(), zero).max().item() if gold64.numel() else 0.0
    scale = own if scale is None else max(own, scale)
    ref_err = 0.0  # where a reference overflowed, its error says nothing (and must not allow everything)
    for r in (ref64, None if spread is None or spread.shape != gold64.shape else spread.detach().double()):
        if r is not None and gold64.numel():
            err = (r - gold64).abs()
            ref_err = max(ref_err, torch.where(keep & torch.isfinite(err), err, zero).max().item())
    if ref.is_floating_point():
        floor = max(floor, ROUNDINGS * torch.finfo(ref.dtype).eps)
    allowed = factor * ref_err + floor * scale + atol_for(ref.dtype)
    diff = (got64 - gold64).abs()
    diff = torch.where(torch.isfinite(got64), diff, torch.full_like(diff, float("inf")))
    diff = torch.where(keep, diff, zero)
    if gold64.numel() == 0:
        return None
    worst = diff.max().item()
    if worst <= allowed:
        return _biased(what, got64, gold64, ref64, spread, keep, allowed, ref.dtype) if ref.dtype in LOW_PRECISION else None
    flat = int(torch.argmax(torch.where(torch.isinf(diff), torch.full_like(diff, 1e308), diff)))
    index = _unravel(flat, gold64.shape)
    expected, value = gold64.reshape(-1)[flat].item(), got64.reshape(-1)[flat].item()
    rel = (diff / (gold64.abs() + 1e-12 + floor * scale))
    return Mismatch(
        what=what, shape=list(gold64.shape), max_abs_err=worst,
        max_rel_err=torch.where(keep, rel, zero).max().item(), index=index,
        expected=expected, got=value, allowed=allowed,
        bad=int((diff > allowed).sum()), total=int(keep.sum()),
        detail=_moved(got64, gold64, keep, allowed, dims) or where(diff > allowed, dims, keep),
    )


# Slices compared pairwise by _moved, at most (size of the dimension)^2 x (elements of the tensor) element reads.
MOVED_BUDGET = 20_000_000


def _name(d: int, ndim: int, dims: tuple[str, ...]) -> str:
    """The author's name of dimension ``d`` of an ``ndim``-dimensional tensor (``dims`` names the last ones), or ""."""
    k = d - (ndim - len(dims))
    return dims[k] if 0 <= k < len(dims) else ""


def _moved(got64: torch.Tensor, gold64: torch.Tensor, keep: torch.Tensor, allowed: float,
           dims: tuple[str, ...] = ()) -> str:
    """Right values in the wrong places: along one dimension, every slice of ``got`` equals some slice of the
    expected tensor, not always its own (heads tiled instead of grouped, two halves swapped). Else ""."""
    zero = torch.zeros((), dtype=torch.float64)
    for d in range(gold64.dim()):
        n = gold64.shape[d]
        if n < 2 or n * n * gold64.numel() > MOVED_BUDGET:
            continue
        g = torch.where(keep, gold64, zero).movedim(d, 0).reshape(n, -1)
        y = torch.where(keep, got64, zero).movedim(d, 0).reshape(n, -1)
        if not torch.isfinite(y).all():
            continue
        far = torch.stack([(y[i] - g).abs().amax(-1) > allowed for i in range(n)])  # got's slice i is not gold's j
        if far.all(1).any() or not far.diagonal().any():
            continue
        pairs = [(i, int((~far[i]).nonzero()[0])) for i in range(n) if far[i, i]]
        if all(g[j].abs().max().item() == 0 for _, j in pairs):
            continue
        name = _name(d, gold64.dim(), dims)
        unit = name or "index"
        said = ", ".join(f"your {unit} {i} holds what {unit} {j} should" for i, j in pairs[:4])
        more = f" (and {len(pairs) - 4} more)" if len(pairs) > 4 else ""
        along = f"the {name} dimension (dimension {d}, size {n})" if name else f"dimension {d} (size {n})"
        return (f"the values are right but in the wrong places along {along}: {said}{more}. "
                "Check the order of a repeat, reshape, transpose or concatenation along it")
    return ""


def where(bad: torch.Tensor, dims: tuple[str, ...] = (), keep: torch.Tensor | None = None) -> str:
    """Where the wrong elements lie, when they lie in some indices of a dimension only: a few runs of wrong (or of
    right) indices, or every index wrong from some point on; in the dimension, of those that show it, with the
    fewest wrong indices (named by ``dims``, the names of the last dimensions). Else "".
    ``keep``: the graded elements; an index with none graded is called neither right nor wrong."""
    keep = torch.ones_like(bad) if keep is None else keep.expand_as(bad)
    if not bad.any() or bad.all():
        return ""
    best = None
    for d in range(bad.dim()):
        n = bad.shape[d]
        rows = bad.movedim(d, 0).reshape(n, -1).any(1) if n > 1 else None
        if rows is None:
            continue
        graded = keep.movedim(d, 0).reshape(n, -1).any(1)
        rows = rows & graded
        if not rows.any() or rows[graded].all():
            continue
        wrong = [int(i) for i in rows.nonzero().flatten()]
        right = [i for i in range(n) if graded[i] and not rows[i]]
        if len(_runs(wrong)) <= MAX_RUNS or len(_runs(right)) <= MAX_RUNS or wrong[0] >= max(1, n // 4):
            if best is None or len(wrong) / n < best[0]:
                best = (len(wrong) / n, d, wrong, right, n, graded)
    if best is None:
        return ""
    _, d, wrong, right, n, graded = best
    name = _name(d, bad.dim(), dims)
    if len(_runs(wrong)) <= MAX_RUNS and (2 * len(wrong) <= n or len(_runs(right)) > MAX_RUNS):
        few, verb, other, rest = wrong, "wrong", right, "right"
    elif len(_runs(right)) <= MAX_RUNS:  # most are wrong: name the few right ones
        few, verb, other, rest = right, "right", wrong, "wrong"
    else:  # scattered, but none before wrong[0]
        first = [i for i in range(wrong[0]) if graded[i]]
        at = f"{name}s >= {wrong[0]} (of {n})" if name else f"indices >= {wrong[0]} of dimension {d} (size {n})"
        return (f"the wrong elements all lie at {at}; {_indices(first, name)} {'is' if len(first) == 1 else 'are'} "
                "right")
    said = f"{_indices(few, name)} (of {n})" if name else f"{_indices(few)} of dimension {d} (size {n})"
    return (f"only {said} {'is' if len(few) == 1 else 'are'} {verb}"
            + (f"; {_indices(other, name)} {'is' if len(other) == 1 else 'are'} {rest}"
               if len(_runs(other)) <= MAX_RUNS else f"; the others are {rest}"))


# where() names at most this many runs of consecutive indices (0..3, 7, 9..12): more reads as noise
MAX_RUNS = 3


def _runs(ix: list[int]) -> list[list[int]]:
    runs: list[list[int]] = []
    for i in ix:
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return runs


def _indices(ix: list[int], name: str = "") -> str:
    """``[0, 1, 2, 5]`` as "indices 0..2, 5" (or "heads 0..2, 5"); one as "index 3" (or "head 3")."""
    parts = [f"{a}" if a == b else f"{a}, {b}" if b == a + 1 else f"{a}..{b}" for a, b in _runs(ix)]
    unit = (name or "index") if len(ix) == 1 else (f"{name}s" if name else "indices")
    return f"{unit} " + ", ".join(parts)


LOW_PRECISION = (torch.bfloat16, torch.float16)
# A systematic error (every element scaled, or shifted, the same way) of at least this many machine epsilons of
# the grading dtype, and BIAS_FACTOR times the reference's own, fails even when each element is within the
# tolerance: in bfloat16 the per-element tolerance is several percent, which a scale by 1 + 1/32 applied only in
# low precision fit inside. Rounding to nearest leans neither way: an honest kernel's systematic error is a
# small fraction of an epsilon (it shrinks with the number of elements); BIAS_MIN_ELEMENTS keeps tiny tensors out.
BIAS_EPSILONS = 2.0
# A slice's or a block's lean needs more: an honest kernel that scales each row by a factor it rounds in low precision
# (a log-sum-exp merge computed in float16: exp(lse - new_lse), several merges a row) leans row by row, by up to 2.2
# epsilons (tests/fixtures/lse_merge_in_low_precision.py, 60 seeds); a scale by 1 + 1/32 (4 bfloat16 epsilons) still fails.
BIAS_PART_EPSILONS = 3.0
BIAS_FACTOR = 4.0
BIAS_MIN_ELEMENTS = 64
# Only where the case is well conditioned in this dtype (the reference's own error at most this many epsilons of the
# tensor's scale): where it is not (large scores: softmax nearly one-hot), honest kernels that round elsewhere lean
# by more than an epsilon (a right flash attention's gradient in bfloat16, measured), and nothing is said.
BIAS_CONDITIONED = 4.0


def _sums(err: torch.Tensor, gold: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """(4, *shape): err * gold, gold ** 2, err and 1 where an element is kept (and its error finite), else 0: summed
    over a tensor, a slice or a block, they give its lean."""
    ok = keep & torch.isfinite(err)
    zero = torch.zeros((), dtype=torch.float64)
    e, g = torch.where(ok, err, zero), torch.where(ok, gold, zero)
    return torch.stack([e * g, g * g, e, ok.double()])


def _lean(total: torch.Tensor) -> tuple[float, float]:
    """(scale, shift) from the sums over the whole tensor: the relative scale error (least squares of err on gold)
    and the mean error over the rms of gold."""
    eg, power, e, n = total.tolist()
    if n == 0 or power <= 0:
        return 0.0, 0.0
    return eg / power, e / n / (power / n) ** 0.5


# The same lean, slice by slice along each dimension (every head, every row, every feature): an error that leans one
# way in some slices and the other way in others (+1/32 on even rows, -1/32 on odd ones) cancels over the whole
# tensor. Measured as the power-weighted rms of the slices' leans, against the same of the reference's own error;
# only slices of at least BIAS_SLICE_ELEMENTS elements (an honest slice's lean shrinks with its size). The same per
# block of the halves of two dimensions (four blocks): a lean one way in two opposite quadrants and the other way in
# the other two cancels over every slice along either dimension (each row leans both ways, half of it each).
BIAS_SLICE_ELEMENTS = 16


def _parts_lean(parts: torch.Tensor) -> tuple[float, float]:
    """(scale, shift) as in _lean per part (``parts``: (4, number of parts) sums), combined as an rms weighted by
    each part's power."""
    used = [(eg, power, e, n) for eg, power, e, n in zip(*parts.tolist()) if n >= BIAS_SLICE_ELEMENTS and power > 0]
    total = sum(power for _, power, _, _ in used)  # (a few hundred parts at most: plain floats beat tensor calls)
    if len(used) < 2 or total <= 0:
        return 0.0, 0.0
    scale2 = sum(eg * eg / power for eg, power, _, _ in used)  # power * (least-squares relative scale error) ** 2
    shift2 = sum(e * e / n for _, _, e, n in used)  # power * (mean error / rms of gold) ** 2, per part
    return (scale2 / total) ** 0.5, (shift2 / total) ** 0.5


def _leans(sums: torch.Tensor, dims: list[int], pairs: list[tuple[int, int]]) -> list[tuple[float, float]]:
    """The lean of the whole tensor, then per slice along each of ``dims``, then per block of each of ``pairs``."""
    out = [_lean(sums.reshape(4, -1).sum(1))]
    for d in dims:
        out.append(_parts_lean(sums.movedim(d + 1, 1).reshape(4, sums.shape[d + 1], -1).sum(2)))
    for a, b in pairs:
        rest = [d + 1 for d in range(sums.dim() - 1) if d not in (a, b)]
        m = sums.sum(rest) if rest else sums  # (4, size of a, size of b)
        ha, hb = (m.shape[1] + 1) // 2, (m.shape[2] + 1) // 2  # index i is in the first half when 2 * i < size
        blocks = [m[:, :ha, :hb], m[:, :ha, hb:], m[:, ha:, :hb], m[:, ha:, hb:]]
        out.append(_parts_lean(torch.stack([q.sum((1, 2)) for q in blocks], 1)))
    return out


def lean_floors(eps: float, n: int) -> list[float]:
    """The least lean that fails for each of the ``n`` leans _leans gives: the whole tensor's, then its parts'."""
    return [BIAS_EPSILONS * eps] + [BIAS_PART_EPSILONS * eps] * (n - 1)


def _biased(what, got64, gold64, ref64, spread, keep, allowed, low: torch.dtype) -> Mismatch | None:
    keep = keep & torch.isfinite(got64)
    if int(keep.sum()) < BIAS_MIN_ELEMENTS:
        return None
    eps = torch.finfo(low).eps
    scale = torch.where(keep, gold64.abs(), torch.zeros((), dtype=torch.float64)).max().item()
    refs = [ref64] + ([spread.detach().double()] if spread is not None and spread.shape == gold64.shape else [])
    for r in refs:
        if torch.where(keep, (r - gold64).abs(), torch.zeros((), dtype=torch.float64)).max().item() \
                > BIAS_CONDITIONED * eps * scale:
            return None
    dims = [d for d in range(gold64.dim()) if gold64.shape[d] > 1]
    pairs = [(a, b) for i, a in enumerate(dims) for b in dims[i + 1:]]
    where_ = [None, *dims, *[list(p) for p in pairs]]  # what each lean is of: the whole, a dimension, a block
    mine = _leans(_sums(got64 - gold64, gold64, keep), dims, pairs)
    floors = lean_floors(eps, len(mine))
    if all(abs(x) <= floor for lean, floor in zip(mine, floors) for x in lean):
        return None  # no lean of this size: the reference's own (what a lean must exceed) need not be measured
    honest = [_leans(_sums(r - gold64, gold64, keep), dims, pairs) for r in refs]
    for i, dim in enumerate(where_):
        for k in range(2):
            if abs(mine[i][k]) > max(floors[i], BIAS_FACTOR * max(abs(h[i][k]) for h in honest)):
                diff = torch.where(keep, (got64 - gold64).abs(), torch.zeros((), dtype=torch.float64))
                flat = int(torch.argmax(diff))
                rel = diff / (gold64.abs() + 1e-12)
                return Mismatch(what=what, shape=list(gold64.shape), max_abs_err=diff.max().item(),
                                max_rel_err=torch.where(keep, rel, torch.zeros((), dtype=torch.float64)).max().item(),
                                index=_unravel(flat, gold64.shape), expected=gold64.reshape(-1)[flat].item(),
                                got=got64.reshape(-1)[flat].item(), allowed=allowed, bad=0, total=int(keep.sum()),
                                bias=mine[i][k], bias_dim=dim if not isinstance(dim, list) else None,
                                bias_block=dim if isinstance(dim, list) else None)
    return None


def _unravel(flat: int, shape) -> list[int]:
    """The index of element ``flat`` of a contiguous tensor of ``shape`` (torch.unravel_index imports sympy:
    a second of CPU in the first check that finds a mismatch)."""
    index = []
    for n in reversed(shape):
        flat, i = divmod(flat, n)
        index.append(i)
    return index[::-1]


def property_error(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a.detach().double() - b.detach().double()).abs().max().item() if a.numel() else 0.0

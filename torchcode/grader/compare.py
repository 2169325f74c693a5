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
            spread: torch.Tensor | None = None) -> Mismatch | None:
    """None when ``got`` is close enough to ``gold``; else where and how badly it differs.

    ``spread``: the reference on inputs nudged by a rounding unit (low precision); the reference's error
    is then the larger of its two errors."""
    got64, gold64, ref64 = got.detach().double(), gold.detach().double(), ref.detach().double()
    keep = torch.ones_like(gold64, dtype=torch.bool)
    if ignore is not None:
        keep = ~ignore.to(torch.bool).expand_as(gold64)
    finite_gold = torch.isfinite(gold64)
    keep = keep & finite_gold
    zero = torch.zeros((), dtype=torch.float64)
    scale = torch.where(keep, gold64.abs(), zero).max().item() if gold64.numel() else 0.0
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
    )


LOW_PRECISION = (torch.bfloat16, torch.float16)
# A systematic error (every element scaled, or shifted, the same way) of at least this many machine epsilons of
# the grading dtype, and BIAS_FACTOR times the reference's own, fails even when each element is within the
# tolerance: in bfloat16 the per-element tolerance is several percent, which a scale by 1 + 1/32 applied only in
# low precision fit inside. Rounding to nearest leans neither way: an honest kernel's systematic error is a
# small fraction of an epsilon (it shrinks with the number of elements); BIAS_MIN_ELEMENTS keeps tiny tensors out.
BIAS_EPSILONS = 2.0
BIAS_FACTOR = 4.0
BIAS_MIN_ELEMENTS = 64
# Only where the case is well conditioned in this dtype (the reference's own error at most this many epsilons of the
# tensor's scale): where it is not (large scores: softmax nearly one-hot), honest kernels that round elsewhere lean
# by more than an epsilon (a right flash attention's gradient in bfloat16, measured), and nothing is said.
BIAS_CONDITIONED = 4.0


def _lean(err: torch.Tensor, gold: torch.Tensor, keep: torch.Tensor) -> tuple[float, float]:
    """(scale, shift): the relative scale error (least squares of err on gold) and the mean error over the rms of gold."""
    zero = torch.zeros((), dtype=torch.float64)
    ok = keep & torch.isfinite(err)
    e, g = torch.where(ok, err, zero), torch.where(ok, gold, zero)
    n, power = int(ok.sum()), (g * g).sum().item()
    if n == 0 or power <= 0:
        return 0.0, 0.0
    return (e * g).sum().item() / power, e.sum().item() / n / (power / n) ** 0.5


# The same lean, slice by slice along each dimension (every head, every row, every feature): an error that leans one
# way in some slices and the other way in others (+1/32 on even rows, -1/32 on odd ones) cancels over the whole
# tensor. Measured as the power-weighted rms of the slices' leans, against the same of the reference's own error;
# only slices of at least BIAS_SLICE_ELEMENTS elements (an honest slice's lean shrinks with its size).
BIAS_SLICE_ELEMENTS = 16


def _slice_lean(err: torch.Tensor, gold: torch.Tensor, keep: torch.Tensor, dim: int) -> tuple[float, float]:
    """(scale, shift) as in _lean, per slice along ``dim``, combined as an rms weighted by each slice's power."""
    zero = torch.zeros((), dtype=torch.float64)
    ok = keep & torch.isfinite(err)
    e = torch.where(ok, err, zero).movedim(dim, 0).reshape(err.shape[dim], -1)
    g = torch.where(ok, gold, zero).movedim(dim, 0).reshape(err.shape[dim], -1)
    n = ok.movedim(dim, 0).reshape(err.shape[dim], -1).sum(1).double()
    power = (g * g).sum(1)
    used = (n >= BIAS_SLICE_ELEMENTS) & (power > 0)
    total = power[used].sum().item()
    if int(used.sum()) < 2 or total <= 0:
        return 0.0, 0.0
    scale = (e * g).sum(1)[used] / power[used]  # each slice's least-squares relative scale error
    shift2 = e.sum(1)[used] ** 2 / n[used]  # power * (mean error / rms of gold) ** 2, per slice
    return ((power[used] * scale * scale).sum().item() / total) ** 0.5, (shift2.sum().item() / total) ** 0.5


def _biased(what, got64, gold64, ref64, spread, keep, allowed, low: torch.dtype) -> Mismatch | None:
    keep = keep & torch.isfinite(got64)
    if int(keep.sum()) < BIAS_MIN_ELEMENTS:
        return None
    eps = torch.finfo(low).eps
    scale = torch.where(keep, gold64.abs(), torch.zeros((), dtype=torch.float64)).max().item()
    for r in (ref64, spread.detach().double() if spread is not None and spread.shape == gold64.shape else None):
        if r is not None and torch.where(keep, (r - gold64).abs(), torch.zeros((), dtype=torch.float64)).max().item() \
                > BIAS_CONDITIONED * eps * scale:
            return None
    refs = [ref64] + ([spread.detach().double()] if spread is not None and spread.shape == gold64.shape else [])
    leans = [(None, _lean(got64 - gold64, gold64, keep), [_lean(r - gold64, gold64, keep) for r in refs])]
    leans += [(d, _slice_lean(got64 - gold64, gold64, keep, d), [_slice_lean(r - gold64, gold64, keep, d) for r in refs])
              for d in range(gold64.dim()) if gold64.shape[d] > 1]
    for dim, mine, honest in leans:
        for k in range(2):
            if abs(mine[k]) > max(BIAS_EPSILONS * eps, BIAS_FACTOR * max(abs(h[k]) for h in honest)):
                diff = torch.where(keep, (got64 - gold64).abs(), torch.zeros((), dtype=torch.float64))
                flat = int(torch.argmax(diff))
                rel = diff / (gold64.abs() + 1e-12)
                return Mismatch(what=what, shape=list(gold64.shape), max_abs_err=diff.max().item(),
                                max_rel_err=torch.where(keep, rel, torch.zeros((), dtype=torch.float64)).max().item(),
                                index=_unravel(flat, gold64.shape), expected=gold64.reshape(-1)[flat].item(),
                                got=got64.reshape(-1)[flat].item(), allowed=allowed, bad=0, total=int(keep.sum()),
                                bias=mine[k], bias_dim=dim)
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

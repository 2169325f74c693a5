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
    honest = [_lean(ref64 - gold64, gold64, keep)]
    if spread is not None and spread.shape == gold64.shape:
        honest.append(_lean(spread.detach().double() - gold64, gold64, keep))
    mine = _lean(got64 - gold64, gold64, keep)
    for k in range(2):
        limit = max(BIAS_EPSILONS * eps, BIAS_FACTOR * max(abs(h[k]) for h in honest))
        if abs(mine[k]) > limit:
            diff = torch.where(keep, (got64 - gold64).abs(), torch.zeros((), dtype=torch.float64))
            flat = int(torch.argmax(diff))
            index = _unravel(flat, gold64.shape)
            rel = diff / (gold64.abs() + 1e-12)
            return Mismatch(what=what, shape=list(gold64.shape), max_abs_err=diff.max().item(),
                            max_rel_err=torch.where(keep, rel, torch.zeros((), dtype=torch.float64)).max().item(),
                            index=index, expected=gold64.reshape(-1)[flat].item(), got=got64.reshape(-1)[flat].item(),
                            allowed=allowed, bad=0, total=int(keep.sum()), bias=mine[k])
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

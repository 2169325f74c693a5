"""The case API for problem authors: everything a ``problems/<id>/cases.py`` needs.

A hidden case is a function decorated with ``@case`` that receives a seeded ``Rng``
and returns a ``Case``: optional constructor arguments (module problems), a list of
``Call``s made in order on one learner object, and optional property ``checks``::

    from torchcode.grader.cases import Call, Case, Same, Out, case

    @case(targets="the 1/sqrt(d_k) scale")
    def wide_head(rng):
        Q, K, V = rng.randn(2, 5, 64), rng.randn(2, 7, 64), rng.randn(2, 7, 32)
        return Case(steps=[Call(Q, K, V)])

The grader runs every call on the learner's code (in the sandbox) and on the
reference (float64 for the expected values, float32 for the tolerance), then
compares outputs and gradients, and evaluates ``checks`` on the learner's own
outputs. Authors never touch the grader. See docs/authoring.md.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Any, Callable

import torch


class Rng:
    """Seeded input factory. Every tensor is float32 unless a dtype is given."""

    def __init__(self, seed: int):
        self.seed = seed
        self.gen = torch.Generator().manual_seed(seed)

    def randn(self, *shape: int, scale: float = 1.0, dtype=torch.float32) -> torch.Tensor:
        return torch.randn(*shape, generator=self.gen, dtype=torch.float64).mul_(scale).to(dtype)

    def uniform(self, *shape: int, low: float = 0.0, high: float = 1.0, dtype=torch.float32) -> torch.Tensor:
        return (torch.rand(*shape, generator=self.gen, dtype=torch.float64) * (high - low) + low).to(dtype)

    def randint(self, low: int, high: int, shape: tuple[int, ...] = ()) -> torch.Tensor:
        return torch.randint(low, high, shape, generator=self.gen)

    def integer(self, low: int, high: int) -> int:
        """A Python int in [low, high]."""
        return int(torch.randint(low, high + 1, (), generator=self.gen))

    def bernoulli(self, *shape: int, p: float = 0.5) -> torch.Tensor:
        return torch.rand(*shape, generator=self.gen) < p


@dataclass(frozen=True)
class Prev:
    """The learner's own output of an earlier call: ``Prev(0, 1)`` is item 1 of call 0's result, handed back as
    it is, or as a caller changes it first: ``.narrow(...)`` (a view of it) or ``.index_select(...)`` (a copy)."""

    step: int
    path: tuple[int, ...] = ()
    view: tuple = ()  # () as returned; ("narrow", dim, start, length) or ("index_select", dim, (i, ...))

    def __init__(self, step: int, *path: int, view: tuple = ()):
        object.__setattr__(self, "step", step)
        object.__setattr__(self, "path", tuple(path))
        object.__setattr__(self, "view", tuple(view))

    def narrow(self, dim: int, start: int, length: int) -> "Prev":
        """``output.narrow(dim, start, length)``: a view sharing its storage (same ``data_ptr()`` when ``start`` is
        0), as speculative decoding cuts the rejected draft tokens off a returned cache. A result kept by the
        cache's address is then stale."""
        return Prev(self.step, *self.path, view=("narrow", int(dim), int(start), int(length)))

    def index_select(self, dim: int, indices) -> "Prev":
        """``output.index_select(dim, indices)``: a new tensor, as beam search reorders a returned cache's batch."""
        return Prev(self.step, *self.path, view=("index_select", int(dim), tuple(int(i) for i in indices)))


@dataclass
class Const:
    """An input tensor that is not differentiated (tables, masks made of floats)."""

    tensor: torch.Tensor


@dataclass
class Refill:
    """The very tensor object call ``step`` was handed as argument ``arg`` (its position or keyword in that
    ``Call``), overwritten in place with ``tensor``'s values just before this call: a caller that reuses one
    buffer (a mask or a batch updated between calls), as callers may. A result kept by the tensor's ``id()``
    or ``data_ptr()`` is then stale. Not differentiated: use it for bool masks, or in a ``grad=False`` case."""

    step: int
    arg: int | str
    tensor: torch.Tensor


@dataclass(frozen=True)
class Alias:
    """The very tensor object call ``step`` was handed as argument ``arg`` (its position or keyword in that
    ``Call``), handed over again: ``Call(x, Alias(0, 0), Alias(0, 0))`` is ``layer(x, x, x)``, self-attention as
    nn.MultiheadAttention's callers write it (``query is key``). The call may be this one (an earlier argument)
    or an earlier one. Code that takes a shortcut when its inputs are the same object is then graded on it."""

    step: int
    arg: int | str


@dataclass
class Config:
    """Keyword fields that reach the constructor as an attribute object (``config.hidden_size``)."""

    fields: dict

    def __init__(self, **fields: Any):
        self.fields = fields


@dataclass
class Call:
    """One call of the learner's function (or module): ``Call(*args, **kwargs)``."""

    args: tuple
    kwargs: dict
    ignore: dict = field(default_factory=dict)  # output path -> bool mask of elements not graded
    new_instance: bool = False  # module problems: run on a freshly built instance (same init, same weights)
    updates: dict = field(default_factory=dict)  # module problems: parameters set in place just before this call
    temporary: bool = False  # the caller frees this call's arguments once it returns
    train: bool | None = None  # module problems: the mode the caller switches the module to just before this call

    def __init__(self, *args: Any, **kwargs: Any):
        self.args, self.kwargs, self.ignore, self.new_instance, self.updates = args, kwargs, {}, False, {}
        self.temporary, self.train = False, None

    def fresh(self) -> "Call":
        """Make this call on a newly constructed module (same constructor arguments, same weights);
        later calls continue on that new instance. State kept on ``self`` by earlier calls is gone,
        so only what the call is handed (e.g. a cache via ``Prev``) can carry history."""
        self.new_instance = True
        return self

    def updated(self, weights: dict) -> "Call":
        """Module problems: just before this call, the caller overwrites these parameters (by the reference's names
        and shapes) in place with new values, as an optimizer step does between two training steps. Anything the
        layer kept computed from its old weights (a fused QKV matrix made on the first call) is then stale. Only in
        a ``grad=False`` case: a training step runs backward before it changes the weights."""
        self.updates = dict(weights)
        return self

    def in_mode(self, train: bool) -> "Call":
        """Module problems: just before this call the caller switches the module to training (``True``, as
        ``module.train()``) or evaluation (``False``, ``module.eval()``); later calls keep that mode, and an instance
        made by ``.fresh()`` starts in it. The case's ``train`` is the mode of its first call. Evaluation right after
        a training step then shows a setting (a dropout rate) fixed at the first call."""
        self.train = bool(train)
        return self

    def temporary_inputs(self) -> "Call":
        """The caller's arguments to this call are temporaries: freed once it returns, before the next call's are made
        (a decoding loop under ``torch.no_grad()`` that builds each step's tensors afresh). CPython then hands a new
        tensor the address of a freed one, so a result kept by ``id()`` (even with ``._version``) is stale. Only in a
        ``grad=False`` case; no ``Refill`` or ``Alias`` may name this call's arguments."""
        self.temporary = True
        return self

    def ungraded(self, mask: torch.Tensor, *path: int) -> "Call":
        """Leave out the elements where ``mask`` is True (broadcast to the output at ``path``)."""
        self.ignore[tuple(path)] = mask
        return self


class Expr:
    """Something computed from the learner's outputs inside a property check; indexable."""

    def __getitem__(self, index) -> "Expr":
        return Indexed(self, index if isinstance(index, tuple) else (index,))

    def resolve(self, outputs: list[dict]) -> torch.Tensor:
        raise NotImplementedError


class Out(Expr):
    """A learner output: ``Out(step, *path)``; ``Out(0)[..., :t]`` slices it."""

    def __init__(self, step: int, *path: int):
        self.step, self.path = step, tuple(path)

    def resolve(self, outputs: list[dict]) -> torch.Tensor:
        return outputs[self.step][self.path]

    def __repr__(self):
        return f"Out({', '.join(map(str, (self.step, *self.path)))})"


class Indexed(Expr):
    def __init__(self, base: Expr, index: tuple):
        self.base, self.index = base, index

    def resolve(self, outputs: list[dict]) -> torch.Tensor:
        return self.base.resolve(outputs)[self.index]


class Cat(Expr):
    """Several expressions concatenated along ``dim`` (e.g. chunked results vs one full call)."""

    def __init__(self, parts: list[Expr], dim: int):
        self.parts, self.dim = parts, dim

    def resolve(self, outputs: list[dict]) -> torch.Tensor:
        return torch.cat([p.resolve(outputs) for p in self.parts], dim=self.dim)


class Fn(Expr):
    """``fn`` applied to expressions, e.g. ``Fn(lambda q, k: q @ k.mT, Out(0, 0), Out(0, 1))``."""

    def __init__(self, fn: Callable, *parts: Expr):
        self.fn, self.parts = fn, parts

    def resolve(self, outputs: list[dict]) -> torch.Tensor:
        return self.fn(*(p.resolve(outputs) for p in self.parts))


def differs(a: torch.Tensor, b: torch.Tensor, by: float = 0.05) -> torch.Tensor:
    """1.0 if two outputs differ by more than rounding, else 0.0: for a check that two calls must not agree (another
    memory, two dropout draws), as ``Same(Fn(differs, Out(1), Out(0)), Fn(lambda o: o.new_ones(()), Out(0)), ...)``.
    "More than rounding" is a largest difference over ``by`` of the largest value: an exact test took rounding for a
    difference (the grader hands inputs in other strides, which round otherwise), so a layer that ignored what changed
    passed when the two calls' inputs were laid out differently."""
    dtype, a, b = a.dtype, a.detach().double(), b.detach().double()
    if not a.numel():
        return torch.zeros((), dtype=dtype)
    return ((a - b).abs().amax() > by * torch.maximum(a.abs().amax(), b.abs().amax())).to(dtype)


def keeps_mean(copies: torch.Tensor, one: torch.Tensor, by: float = 0.1) -> torch.Tensor:
    """1.0 if the mean over dim 0 of ``copies`` (one input repeated along the batch, each copy its own dropout draw,
    in training mode) is within ``by`` of ``one`` (that input's output in eval mode, copies too), relative in norm; else
    0.0. On 1024 copies of mha's layer (3 queries, 4 keys), a dropout that keeps the expectation (kept values scaled
    by 1 / (1 - p)) is within 0.016 at p = 0.1 and 0.051 at p = 0.5 (200 draws), and attention and residual dropout
    both at p = 0.5 within 0.067 (120 draws: review30's nanoGPT-style layers failed half their seeds at 0.055); one
    without the scale is 0.13 or more off at p = 0.2 (0.064 to 0.11 at p = 0.1: caught only sometimes). (More copies
    would tell them apart better, but a layer that flattens the batch into the tokens then attends over copies x
    tokens squared.)"""
    mean, want = copies.detach().double().mean(0), one.detach().double().mean(0)
    dtype = copies.dtype
    if mean.shape != want.shape or not want.norm() > 0:
        return torch.zeros((), dtype=dtype)
    return ((mean - want).norm() / want.norm() <= by).to(dtype)


@dataclass
class Same:
    """A property: two views of the learner's outputs must agree; ``because`` says what it means if not."""

    a: Expr
    b: Expr
    because: str


@dataclass
class Case:
    steps: list[Call]
    init: dict | None = None  # module constructor keyword arguments
    checks: list[Same] = field(default_factory=list)
    grad: bool = True  # also grade gradients w.r.t. float inputs and parameters
    compare_grads: bool = True  # False (with grad=True): a training step with dropout: the batch holds copies of one
    #                             input, which share one output gradient; the gradients, random, are compared summed
    #                             over the copies, in expectation (docs/authoring.md); a failing backward is a verdict
    max_intermediate: int | None = None  # no tensor made during a call may hold this many elements
    intermediate_hint: str = ""  # what such a tensor is, e.g. "the full S x S score matrix"
    max_reduction: int | None = None  # no single op may combine this many values into one (softmax, sum, max, matmul)
    reduction_hint: str = ""  # what such a reduction is, e.g. "a softmax over all S keys at once"
    sizes: tuple[int, ...] = ()  # the problem size of each call, for max_work_exponent
    max_work_exponent: float | None = None  # the calls' arithmetic may grow at most like size ** this
    max_work: int | None = None  # the last call's arithmetic may be at most this: a bound no added work can dilute
    work_hint: str = ""  # what grows faster, e.g. "phi(Q) phi(K)^T, even in chunks"
    train: bool = False  # module mode during the calls
    time_factor: float = 1.0  # this case's time limit: the per-case limit times this (1 to 10). For a long case (4099
    #                           tokens): every torch op pays the grader's guards, so a correct loop over small tiles
    #                           takes many times what it takes alone
    weights: dict | None = None  # module problems: these parameters, by name, instead of random ones (others drawn)
    sibling: dict | None = None  # module problems: constructor arguments of another instance built right after the
    #                              case's own (and every .fresh() one), before its calls, and never called: a model's
    #                              other layer. A setting kept on the class, not on self, then has the sibling's value
    name: str = ""
    targets: str = ""


@dataclass
class CaseDef:
    name: str
    targets: str
    build: Callable[[Rng], Case]
    dtypes: tuple[str, ...] | None = None  # the grading dtypes this case runs in (None: every one)

    def runs_in(self, dtype: str) -> bool:
        return self.dtypes is None or dtype in self.dtypes

    def make(self, seed: int, variant: str = "") -> Case:
        """The case for ``seed``; another ``variant`` draws other values from the same builder (a replay)."""
        rng = Rng(case_seed(seed, self.name + variant))
        c = self.build(rng)
        if not isinstance(c, Case):
            raise TypeError(f"case '{self.name}' must return a Case, got {type(c).__name__}")
        c.name, c.targets = self.name, c.targets or self.targets
        return c


TRAINING_MEAN = ("in training mode (a new nn.Module starts in it; model.train() switches to it) the mean of many copies' "
                 "outputs is not what eval mode gives: compute the same attention in both modes (dropout, if you add "
                 "it, keeps each output's expectation: scale what it keeps by 1 / (1 - p))")


def training_step(init: dict, calls: list[tuple], copies: int = 1024, out: tuple[int, ...] = (),
                  inputs_need_grad: bool = True) -> Case:
    """A training step on a module (a new nn.Module starts in training mode, and a model trains in it), for a
    problem whose contract has no dropout, where a layer may add one that is off in eval mode: each call's batch-1
    arguments in ``calls`` are repeated ``copies`` times along the batch and run in training mode, backward too, then
    once more in eval mode (8 copies). Each copy's output (``out``: its path in the result) is its own draw, so
    ungraded; their mean must be eval mode's (``keeps_mean``); the gradients are judged in expectation
    (``compare_grads=False``); the rest (a returned cache) and the eval run exactly. ``Prev(i, ...)`` in a call names
    call ``i`` of the same run. A layer whose training path differs (no cache returned, an in-place dropout that
    breaks backward) fails here: cases run in eval mode otherwise. ``inputs_need_grad=False``: the tensors are
    handed as ``Const`` (a trainable layer on a frozen embedding): only the weights get gradients, and they must."""
    n = len(calls)

    def batch(v, shift: int, many: int):
        if isinstance(v, Prev):
            return Prev(v.step + shift, *v.path, view=v.view)
        if isinstance(v, torch.Tensor):
            copies = v.expand(many, *v.shape[1:]).clone()
            return copies if inputs_need_grad else Const(copies)
        return v

    everything = torch.ones(1, 1, 1, dtype=torch.bool)  # random values: judged by their mean alone
    steps = [Call(*(batch(a, 0, copies) for a in args)).ungraded(everything, *out) for args in calls]
    steps += [Call(*(batch(a, n, 8) for a in args)) for args in calls]  # (8 copies: its plain mismatch is no smaller
    # than other cases', which explain a mistake every case shares better than a case about training does)
    steps[n].in_mode(False)
    one = Fn(lambda o: torch.ones((), dtype=o.dtype), Out(0, *out))
    return Case(init=init, steps=steps, train=True, compare_grads=False,
                checks=[Same(Fn(keeps_mean, Out(i, *out), Out(n + i, *out)), one, TRAINING_MEAN) for i in range(n)],
                time_factor=3)  # a correct layer that loops over the batch in Python runs 1024 of them, and backward


def signature(v):
    """A value with its tensors replaced by their shapes and dtypes (hashable)."""
    if isinstance(v, torch.Tensor):
        return ("T", tuple(v.shape), str(v.dtype))
    if isinstance(v, Const):
        return ("K", signature(v.tensor))
    if isinstance(v, Prev):
        return ("P", v.step, v.path, v.view)
    if isinstance(v, Refill):
        return ("R", v.step, v.arg, signature(v.tensor))
    if isinstance(v, Alias):
        return ("A", v.step, v.arg)
    if isinstance(v, Config):
        return ("NS", tuple(sorted((k, signature(x)) for k, x in v.fields.items())))
    if isinstance(v, (tuple, list)):
        return (type(v).__name__, tuple(signature(x) for x in v))
    if isinstance(v, dict):
        return ("D", tuple(sorted((k, signature(x)) for k, x in v.items())))
    return ("V", type(v).__name__, repr(v))


def structure(c: Case):
    """Everything about a case but its tensors' values: shapes, dtypes, every other argument."""
    steps = tuple((signature(s.args), signature(s.kwargs), s.new_instance, signature(s.ignore), signature(s.updates),
                   s.temporary, s.train)
                  for s in c.steps)
    return (signature(c.init), signature(c.sibling), steps, c.grad, c.compare_grads, c.train, c.max_intermediate,
            len(c.checks))


def case_seed(seed: int, name: str) -> int:
    return (seed * 1_000_003 + zlib.crc32(name.encode())) % (2**62)


def case(fn: Callable | None = None, *, targets: str = "", dtypes: tuple[str, ...] | None = None):
    """Mark a function of ``cases.py`` as a hidden case; cases run in definition order.

    ``dtypes``: run the case only in these grading dtypes (e.g. ``("float32", "bfloat16")`` for values that
    float16 cannot hold); by default it runs in every dtype graded."""

    def mark(f: Callable) -> Callable:
        f.__torchcode_case__ = CaseDef(f.__name__, targets or (f.__doc__ or "").strip(), f,
                                       tuple(dtypes) if dtypes is not None else None)
        return f

    return mark(fn) if fn is not None else mark


def benchmark(fn: Callable) -> Callable:
    """Mark ``fn(rng, size) -> Case`` (one call) as the input builder of ``torchcode bench``."""
    fn.__torchcode_benchmark__ = True
    return fn


def baseline(fn: Callable) -> Callable:
    """Mark a fused PyTorch implementation (same signature as the entry point) as bench's library baseline."""
    fn.__torchcode_baseline__ = True
    return fn


def find_marked(namespace: dict, mark: str) -> Callable | None:
    return next((v for v in namespace.values() if getattr(v, mark, False)), None)


def collect(namespace: dict) -> list[CaseDef]:
    return [v.__torchcode_case__ for v in namespace.values() if hasattr(v, "__torchcode_case__")]

"""Run one case program on an entry point: construct, load weights, call in order, backprop.

The same code runs the learner's entry point (inside the worker, under guards) and
the reference kernel (in the trusted process), so both see exactly the same calls.
"""

from __future__ import annotations

import contextlib
import types
from dataclasses import dataclass, field

import torch

from torchcode.grader.protocol import AliasRef, ConstTensor, NamespaceValue, PrevRef, RefillRef

Path = tuple[int, ...]


class InterfaceProblem(Exception):
    """The learner's module does not match the contract (parameter names/shapes)."""


class OutputUnusable(Exception):
    """An earlier output cannot be handed back as a case's caller does (``Prev.narrow``): its shape is wrong."""


class InputModified(Exception):
    """A call changed a tensor it was given (values, shape or strides), found after call ``during``.

    ``given`` is the call it was passed to, ``where`` the argument (position or keyword name) and
    ``path`` the index inside it (``cache[0]``); ``prev`` the call whose output it was (a ``Prev``).
    ``where == RETURNED``: a tensor that call ``given`` returned changed afterwards (``path`` in its output)."""

    def __init__(self, during: int, given: int, where, path: Path, prev: int | None):
        super().__init__(f"call {given + 1}'s input {where}{list(path)} was modified during {during + 1}")
        self.during, self.given, self.where, self.path, self.prev = during, given, where, path, prev

    def to_dict(self) -> dict:
        return {"kind": "mutated", "during": self.during, "given": self.given, "where": self.where,
                "path": list(self.path), "prev": self.prev}


RETURNED = "returned"  # InputModified.where for a tensor an earlier call returned
_BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
_equal = torch.equal  # bound before any submission runs (monkeypatching torch.equal changes nothing here)


@dataclass
class _Received:
    """An input tensor as the caller handed it over, to prove after each call that it is unchanged."""

    tensor: torch.Tensor
    given: int
    where: object
    path: Path
    prev: int | None
    layout: tuple = ()
    copy: torch.Tensor | None = None

    def __post_init__(self):
        t = self.tensor.detach()
        self.layout = (tuple(t.shape), t.stride(), t.storage_offset(), t.dtype)
        self.copy = t.clone() if not t.is_meta else None

    def unchanged(self) -> bool:
        t = self.tensor.detach()
        if (tuple(t.shape), t.stride(), t.storage_offset(), t.dtype) != self.layout:
            return False
        if self.copy is None:  # a dry run on the meta device: there are no values to compare
            return True
        bits = _BITS.get(t.element_size())
        if bits is None or t.is_complex():
            return _equal(t, self.copy)
        return _equal(t.view(bits), self.copy.view(bits))  # bit for bit: NaN == NaN, -0.0 != 0.0


@dataclass(frozen=True)
class Calling:
    """How the entry point is called, as real callers do: the first ``positional`` contract parameters by
    position (their names are the learner's choice), the others by keyword (their names are the contract).
    ``-1``: exactly as the case wrote the call."""

    params: tuple[str, ...] = ()
    positional: int = -1
    init: tuple[str, ...] = ()
    init_positional: int = -1

    def call(self, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        return _arrange(args, kwargs, self.params, self.positional)

    def construct(self, init: dict) -> tuple[tuple, dict]:
        return _arrange((), init, self.init, self.init_positional)


def _arrange(args: tuple, kwargs: dict, names: tuple[str, ...], n_pos: int) -> tuple[tuple, dict]:
    if n_pos < 0 or len(args) > len(names) or any(names[j] in kwargs for j in range(len(args))):
        return args, kwargs
    named = {**dict(zip(names, args)), **kwargs}
    pos = []
    for name in names[:n_pos]:
        if name not in named:
            break
        pos.append(named.pop(name))
    return tuple(pos), named


@dataclass
class Program:
    """A decoded case: what to construct and call. Tensors are already in the grading dtype."""

    init: dict | None
    state: dict[str, torch.Tensor]
    steps: list[tuple[tuple, dict]]
    grad: bool
    train: bool = False
    cotangents: dict[tuple[int, Path], torch.Tensor] = field(default_factory=dict)
    fresh: frozenset[int] = frozenset()  # steps run on a newly built module (same init, same weights)
    layouts: tuple[str, ...] = ()  # memory layout of each input tensor, in the order the calls receive them
    sibling: dict | None = None  # constructor arguments of another instance built after each one called (never called)
    calling: Calling = field(default_factory=Calling)
    updates: dict = field(default_factory=dict)  # call -> {parameter name: new values} set in place just before it
    inference: bool = False  # a forward-only case: the calls run under torch.no_grad(), as inference does
    from_graph: bool = False  # inputs that get a gradient are handed as views of the leaves (an earlier layer's output)
    temporary: frozenset[int] = frozenset()  # steps whose arguments are freed once they return (forward-only cases)
    modes: dict = field(default_factory=dict)  # call -> the mode (train: True) the module is switched to just before it
    forms: dict = field(default_factory=dict)  # call -> the form of the reference's output (``form()``), for the calls
    #                                             a later call is handed an output of (a Prev): checked before that


@dataclass
class Stage:
    """Where execution is, for error messages: 'in __init__', 'in call 2', ..."""

    name: str = "in __init__"


@dataclass
class Execution:
    outputs: list = field(default_factory=list)  # each call's return value, as plain tuples and lists (``plain()``)
    returned: list = field(default_factory=list)  # each call's return value as it was (what a later call is handed)
    input_grads: dict[int, torch.Tensor | None] = field(default_factory=dict)  # input tensor order -> grad
    param_grads: dict[str, torch.Tensor | None] = field(default_factory=dict)
    work: list[int] = field(default_factory=list)  # arithmetic of each call, when the guard counts it
    modules: list = field(default_factory=list)  # the instances built (a module problem)


def materialize(v):
    """Turn decoded Config values into attribute objects."""
    if isinstance(v, NamespaceValue):
        return types.SimpleNamespace(**{k: materialize(x) for k, x in v.items()})
    if isinstance(v, tuple) and not isinstance(v, PrevRef):
        return tuple(materialize(x) for x in v)
    return v


LAYOUTS = ("contiguous", "transposed", "reversed", "padded", "outer_swapped")


def layouts_for(ndim: int) -> tuple[str, ...]:
    """The non-contiguous layouts that make sense for a tensor of this many dims."""
    if ndim == 0:
        return ()
    if ndim == 1:
        return ("padded",)
    if ndim == 2:
        return ("transposed", "padded")
    return ("transposed", "reversed", "padded", "outer_swapped")


def lay_out(t: torch.Tensor, layout: str, device) -> torch.Tensor:
    """A new tensor (its own storage, no autograd history) with ``t``'s values in the named memory layout.

    transposed: the last two dims swapped in memory (what ``x.transpose(-1, -2)`` of a contiguous tensor gives);
    reversed: every dim reversed in memory (column-major); outer_swapped: the first two dims swapped in memory
    (a sequence-first buffer seen batch-first); padded: each innermost row followed by unused elements (a slice
    of a wider buffer), or every other element for 1-D.
    """
    nd = t.dim()
    if layout not in layouts_for(nd):
        return torch.Tensor.to(t, device, copy=True)  # not t.to(...): no bound method alive as the tensor is made
    order = list(range(nd))  # memory order, outermost first
    if layout == "transposed":
        order[-2], order[-1] = order[-1], order[-2]
    elif layout == "reversed":
        order.reverse()
    elif layout == "outer_swapped":
        order[0], order[1] = order[1], order[0]
    step, pad = (2, 0) if layout == "padded" and nd == 1 else (1, 3 if layout == "padded" else 0)
    strides, running = [0] * nd, step
    for k, d in enumerate(reversed(order)):
        strides[d] = running
        running = running * max(t.shape[d], 1) + (pad if k == 0 else 0)
    out = torch.empty_strided(tuple(t.shape), strides, dtype=t.dtype, device=device)
    with torch.no_grad():
        out.copy_(t)
    return out


_SEARCH = 4096  # how many Python objects to try for a freed address (an allocator serves other blocks first)
_empty, _detach = torch.empty, torch.Tensor.detach  # bound before any submission runs


def _placed(t: torch.Tensor, address: int | None) -> torch.Tensor:
    """``t`` as a Python object at ``address``, the address of a tensor the caller has just freed, when CPython can be
    brought to hand it back: as in a caller's loop, where each step's new tensor often lands where the last one was.
    Blocks of that size are taken (by empty tensors, kept until the end) until the freed one comes up; it is then
    freed again and the next tensor object made (a detached alias of ``t``: same storage, strides and values) lands
    there. ``t`` itself when the address is not free (the submission kept the old tensor) or not found."""
    if address is None:
        return t
    fillers = []
    for _ in range(_SEARCH):
        f = _empty(0)
        if id(f) == address:
            del f
            moved = _detach(t)
            return moved if id(moved) == address else t
        fillers.append(f)
    return t


def input_dims(steps) -> list[int]:
    """The number of dims of each input tensor of a program's calls, in the order ``run`` makes them."""
    dims: list[int] = []

    def walk(v):
        if isinstance(v, torch.Tensor):
            dims.append(v.dim())
        elif isinstance(v, ConstTensor):
            dims.append(v.tensor.dim())
        elif isinstance(v, tuple) and not isinstance(v, PrevRef):
            for x in v:
                walk(x)

    for args, kwargs in steps:
        for v in (*args, *kwargs.values()):
            walk(v)
    return dims


def viewed(t, view: tuple, what: str = "an output"):
    """An earlier output as the caller hands it back (``Prev.narrow`` / ``Prev.index_select``); OutputUnusable when
    its shape has no room for that (the learner's layout is not the contract's)."""
    if not view:
        return t
    op, dim = view[0], view[1]
    needed = view[2] + view[3] if op == "narrow" else max(view[2], default=-1) + 1
    if not isinstance(t, torch.Tensor) or t.dim() <= dim or t.shape[dim] < needed:
        shape = f"of shape {list(t.shape)}" if isinstance(t, torch.Tensor) else f"(a {type(t).__name__})"
        use = "cuts it to its first positions" if op == "narrow" else "reorders its batch"
        raise OutputUnusable(f"{what} {shape} cannot be handed back as the caller does (it {use} along dim {dim}, "
                             f"which needs at least {needed} there): return it in the layout the problem states")
    if op == "narrow":
        return t.narrow(dim, view[2], view[3])
    return t.index_select(dim, torch.tensor(view[2], dtype=torch.long, device=t.device))


def form(v, depth: int = 0):
    """The shape of a returned value without its tensors: "T" a tensor, None, "X" anything else, a list a tuple."""
    if isinstance(v, torch.Tensor):
        return "T"
    if v is None:
        return None
    if isinstance(v, (tuple, list)) and depth < 8:
        return [form(x, depth + 1) for x in v]
    return "X"


def said_form(f) -> str:
    """A form as the learner reads it: ``(tensor, (tensor, tensor))``."""
    if isinstance(f, list):
        return "(" + ", ".join(said_form(x) for x in f) + ("," if len(f) == 1 else "") + ")"
    return {"T": "tensor", None: "None"}.get(f, "an object")


class TooDeep:
    """Stands for a returned value nested deeper than any output the contract has (a list that holds itself)."""


def plain(v, depth: int = 0, budget: list | None = None):
    """A returned value with its tuple and list subclasses made plain (a namedtuple becomes a tuple), read through
    the base types' own iteration: an overridden ``__iter__``, ``__getitem__`` or ``__len__`` of an output object
    never runs again when the grader reads the results. Past 8 levels or 1000 items (a list that holds itself, many
    times over) the rest is a ``TooDeep``."""
    budget = [1000] if budget is None else budget
    budget[0] -= 1
    if depth > 8 or budget[0] < 0:  # outputs nest 3 levels deep at most; the reply's header nests 2 levels per level
        return TooDeep()
    if isinstance(v, tuple):
        return tuple(plain(x, depth + 1, budget) for x in tuple.__iter__(v))
    if isinstance(v, list):
        return [plain(x, depth + 1, budget) for x in list.__iter__(v)]
    return v


def item(obj, path: Path):
    """What a caller indexes out of a returned object (``cache = out[1]``), read with the base types' own
    ``__getitem__``: the very object the code returned there (its namedtuple, its fields), no code of its own run."""
    for i in path:
        obj = tuple.__getitem__(obj, i) if isinstance(obj, tuple) else list.__getitem__(obj, i) \
            if isinstance(obj, list) else obj[i]
    return obj


def get_path(obj, path: Path):
    for i in path:
        obj = obj[i]
    return obj


def flatten(obj, path: Path = ()) -> dict[Path, object]:
    """Leaves of a returned value by path: tensors, None, or other objects."""
    if isinstance(obj, (tuple, list)):
        out = {}
        for i, x in enumerate(obj):
            out.update(flatten(x, path + (i,)))
        if not obj:
            out[path] = ()
        return out
    return {path: obj}


def check_parameters(module: torch.nn.Module, state: dict[str, torch.Tensor]) -> None:
    lazy = [n for n, p in module.named_parameters() if isinstance(p, torch.nn.parameter.UninitializedParameter)]
    if lazy:  # their shape is unknown until a first forward: the contract's weights cannot be loaded into them
        raise InterfaceProblem(f"{', '.join(lazy[:4])}{' ...' if len(lazy) > 4 else ''} "
                               f"{'is' if len(lazy) == 1 else 'are'} not initialised after __init__ (a lazy module "
                               "such as nn.LazyLinear): declare the layers with their sizes (nn.Linear(in, out)), as the "
                               "problem states, so that the weights can be loaded before the first call")
    got = {n: tuple(p.shape) for n, p in module.named_parameters()}
    want = {n: tuple(t.shape) for n, t in state.items()}
    missing = [n for n in want if n not in got]
    extra = [n for n in got if n not in want]
    wrong = [f"{n} is {list(got[n])}, expected {list(want[n])}" for n in want if n in got and got[n] != want[n]]
    problems = []
    if missing:
        problems.append("missing parameters: " + ", ".join(missing))
    if extra:
        problems.append("unexpected parameters: " + ", ".join(extra))
    if wrong:
        problems.append("wrong shapes: " + "; ".join(wrong))
    if problems:
        raise InterfaceProblem("; ".join(problems) + ". The parameter names and shapes are part of the problem's contract.")


def run(entry, is_module: bool, prog: Program, stage: Stage, *, guard_factory=None, dtype=None,
        make_cotangent=None, device: str = "cpu") -> Execution:
    """Execute ``prog`` on ``entry`` (a function, or a module class).

    ``guard_factory()`` returns a context manager wrapped around construction and each
    call (the worker passes its guards; the reference runs unguarded).
    ``make_cotangent(step, path, out)`` (trusted side only) creates the random output
    gradients; they are stored in ``prog.cotangents`` for the other runs to reuse.
    """
    guard = guard_factory or contextlib.nullcontext
    ex = Execution()
    leaves: list[torch.Tensor] = []
    received: list[_Received] = []
    laid: list[int] = [0]  # input tensors made so far: the index into prog.layouts
    handed: dict[tuple[int, object], torch.Tensor] = {}  # (call, position or keyword) -> the tensor object given

    made: dict[int, list[torch.Tensor]] = {}  # id(program tensor) -> its inputs made ahead, in the order of use
    given: list[int] = []  # the addresses of the current call's new input tensors, in the order they were made
    freed: list[int] = []  # those of the last temporary call, once freed: where the next call's inputs are placed

    def fresh_input(t: torch.Tensor) -> torch.Tensor:
        ahead = made.get(id(t))
        return ahead.pop(0) if ahead else new_input(t)

    def new_input(t: torch.Tensor) -> torch.Tensor:
        k, laid[0] = laid[0], laid[0] + 1
        made_now = lay_out(t, prog.layouts[k] if k < len(prog.layouts) else "contiguous", device)
        if freed:
            made_now = _placed(made_now, freed.pop(0))
        given.append(id(made_now))
        return made_now

    def make_ahead(v) -> None:
        """Make a call's new input tensors, in the order its arguments receive them, before anything else is
        allocated: CPython hands them the addresses just freed, as a caller's next temporaries get them."""
        if isinstance(v, torch.Tensor):
            made.setdefault(id(v), []).append(new_input(v))
        elif isinstance(v, ConstTensor):
            made.setdefault(id(v.tensor), []).append(new_input(v.tensor))
        elif isinstance(v, tuple) and not isinstance(v, (PrevRef, RefillRef, AliasRef)):
            for x in v:
                make_ahead(x)

    def leaf(t: torch.Tensor) -> torch.Tensor:
        t = fresh_input(t)
        leaves.append(t)  # (where its gradient is read)
        if prog.grad and t.is_floating_point():
            t.requires_grad_(True)
            if prog.from_graph:  # the output of an earlier layer: not a leaf, its grad_fn set, its layout the same
                return t.view_as(t)
        return t

    def resolve(v, call: int, where, path: Path = (), prev: int | None = None):
        """The value a call receives; every tensor in it is remembered to check it is left unchanged."""
        if isinstance(v, PrevRef):
            step, sub, view = v
            expected = prog.forms.get(step, "?")
            if expected != "?" and form(ex.outputs[step]) != expected:  # what it hands back is not the contract's
                raise OutputUnusable(f"call {step + 1} returned {said_form(form(ex.outputs[step]))} where the problem "
                                     f"returns {said_form(expected)}, and call {call + 1} is handed output"
                                     f"{''.join(f'[{i}]' for i in sub)} of it: return the problem's form")
            given = item(ex.returned[step], sub) if not view else viewed(
                get_path(ex.outputs[step], sub), view, f"output{''.join(f'[{i}]' for i in sub)} of call {step + 1}")
            return watch(given, call, where, path, step)
        if isinstance(v, torch.Tensor):
            return watch(leaf(v), call, where, path, prev)
        if isinstance(v, ConstTensor):
            return watch(fresh_input(v.tensor), call, where, path, prev)
        if isinstance(v, RefillRef):
            return watch(refill(v), call, where, path, prev)
        if isinstance(v, AliasRef):
            return alias(v)
        if isinstance(v, tuple):
            return tuple(resolve(x, call, where, path + (j,), prev) for j, x in enumerate(v))
        return materialize(v)

    def handing(v, call: int, where):
        if isinstance(v, torch.Tensor):
            handed[(call, where)] = v
        return v

    def refill(v: RefillRef) -> torch.Tensor:
        """The same tensor object an earlier call was given, its values overwritten in place (a reused buffer)."""
        t = handed.get((v.step, v.arg))
        if t is None or t.requires_grad or t.shape != v.tensor.shape:
            raise TypeError(f"Refill({v.step}, {v.arg!r}) names no tensor of that shape which that call was given "
                            "and which gets no gradient")
        with torch.no_grad():
            t.copy_(v.tensor)
        for r in received:  # the caller changed it, not the call: what each later call must leave is the new value
            if r.tensor is t:
                r.copy = None if t.is_meta else t.detach().clone()
        return t

    def alias(v: AliasRef) -> torch.Tensor:
        """The same tensor object an earlier argument was given (already watched where it was first given)."""
        t = handed.get(tuple(v))
        if t is None:
            raise TypeError(f"Alias({v[0]}, {v[1]!r}) names no tensor that call was given before this argument")
        return t

    def watch(v, call: int, where, path: Path, prev: int | None):
        if isinstance(v, torch.Tensor):
            received.append(_Received(v, call, where, path, prev))
        elif isinstance(v, (tuple, list)):
            for j, x in enumerate(v):
                watch(x, call, where, path + (j,), prev)
        return v

    def check_inputs(during: int) -> None:
        """Every tensor a call was given, and every tensor a call returned, must still be as it was."""
        for r in sorted(received, key=lambda r: r.where == RETURNED):  # an input names the bug best
            if not r.unchanged():
                raise InputModified(during, r.given, r.where, r.path, r.prev)

    modules: list[torch.nn.Module] = ex.modules
    siblings: list = []  # kept alive for the whole case, as a model keeps its layers
    weights = dict(prog.state)  # the weights as they are now: a .fresh() instance after an update gets the new ones
    mode = [prog.train]  # the mode as it is now: a .fresh() instance after a switch starts in it

    def build() -> torch.nn.Module:
        init_args, init_kwargs = prog.calling.construct({k: materialize(v) for k, v in (prog.init or {}).items()})
        with guard() as g:
            module = entry(*init_args, **init_kwargs)
            if hasattr(g, "check_modules"):
                g.check_modules(module)
        if not isinstance(module, torch.nn.Module):
            raise InterfaceProblem(f"constructing it returned a {type(module).__name__}, not an nn.Module")
        check_parameters(module, prog.state)
        module.to(device)
        if dtype is not None:
            module.to(dtype)
        with torch.no_grad():
            params = dict(module.named_parameters())
            for name, value in weights.items():
                params[name].copy_(value)
        module.train(mode[0])
        modules.append(module)
        if prog.sibling is not None:  # a model's other layer, built before this one is called
            sib_args, sib_kwargs = prog.calling.construct({k: materialize(v) for k, v in prog.sibling.items()})
            with guard():
                siblings.append(entry(*sib_args, **sib_kwargs))
        return module

    if is_module:
        stage.name = "in __init__"
        target = build()
    else:
        target = entry

    for i, (args, kwargs) in enumerate(prog.steps):
        if is_module and i in prog.modes:  # the caller's model.train() / model.eval() between two calls
            mode[0] = prog.modes[i]
            target.train(mode[0])
        if is_module and i in prog.fresh and i > 0:
            stage.name = f"in __init__ (a new instance for call {i + 1})"
            target = build()
        if is_module and prog.updates.get(i):  # the caller's optimizer step between two calls
            with torch.no_grad():
                params = dict(target.named_parameters())
                for name, value in prog.updates[i].items():
                    if name in params and isinstance(value, torch.Tensor):
                        params[name].copy_(value)
                        weights[name] = value
        stage.name = f"in call {i + 1}"
        n_leaves = len(leaves)
        if not made:
            given.clear()  # (inputs made ahead were counted when they were made)
        a, kw = prog.calling.call(tuple(handing(resolve(x, i, j), i, j) for j, x in enumerate(args)),
                                  {k: handing(resolve(x, i, k), i, k) for k, x in kwargs.items()})
        # a case that grades no gradient calls as inference does, under torch.no_grad(): a path taken only when
        # autograd is off (a static cache written in place, a fused shortcut) is graded too
        with (torch.no_grad() if prog.inference else contextlib.nullcontext()), guard() as g:
            before = getattr(g, "work", 0)
            ex.returned.append(target(*a, **kw))
        ex.outputs.append(plain(ex.returned[-1]))
        ex.work.append(getattr(g, "work", 0) - before)
        check_inputs(i)
        watch(ex.outputs[-1], i, RETURNED, (), i)
        if i in prog.temporary and not prog.grad:  # the caller frees its temporaries: a new tensor may take an id()
            received[:] = [r for r in received if r.given != i or r.where == RETURNED]
            for key in [k for k in handed if k[0] == i]:
                del handed[key]
            del leaves[n_leaves:], a, kw
            freed[:], given[:] = given, []
            if i + 1 < len(prog.steps):
                for x in (*prog.steps[i + 1][0], *prog.steps[i + 1][1].values()):
                    make_ahead(x)
            freed.clear()

    if prog.grad:
        stage.name = "in backward (while computing gradients)"
        if make_cotangent is not None:
            for step, out in enumerate(ex.outputs):
                for path, t in flatten(out).items():
                    if isinstance(t, torch.Tensor) and t.is_floating_point() and t.requires_grad:
                        prog.cotangents[(step, path)] = make_cotangent(step, path, t)
        loss = None
        for (step, path), cot in prog.cotangents.items():
            try:
                out = get_path(ex.outputs[step], path)
            except (IndexError, KeyError, TypeError):
                continue
            if isinstance(out, torch.Tensor) and out.shape == cot.shape and out.requires_grad:
                term = (out * cot.to(out.device, out.dtype)).sum()
                loss = term if loss is None else loss + term
        if loss is not None:
            loss.backward()
            check_inputs(len(prog.steps))
        for i, t in enumerate(leaves):
            if t.requires_grad:
                ex.input_grads[i] = t.grad
        if modules:  # instances share the same weights: a weight's gradient is the sum over instances
            for m in modules:
                for n, p in m.named_parameters():
                    if p.grad is not None:
                        prev = ex.param_grads.get(n)
                        ex.param_grads[n] = p.grad if prev is None else prev + p.grad
                    else:
                        ex.param_grads.setdefault(n, None)
    return ex


def bench_target(entry, is_module: bool, prog: Program, *, dtype, device: str):
    """What a benchmark calls: the function itself, or the module built with the program's weights (eval mode)."""
    if not is_module:
        return entry
    init_args, init_kwargs = prog.calling.construct({k: materialize(v) for k, v in (prog.init or {}).items()})
    target = entry(*init_args, **init_kwargs)
    target.to(device).to(dtype)
    with torch.no_grad():
        params = dict(target.named_parameters())
        for name, value in prog.state.items():
            params[name].copy_(value)
    target.eval()
    return target


def bench_args(prog: Program, device: str) -> tuple[tuple, dict]:
    """The single call of a benchmark program, its tensors moved to ``device``."""
    (args, kwargs), = prog.steps

    def move(v):
        if isinstance(v, torch.Tensor):
            return v.to(device)
        if isinstance(v, ConstTensor):
            return v.tensor.to(device)
        if isinstance(v, tuple):
            return tuple(move(x) for x in v)
        return materialize(v)

    return prog.calling.call(tuple(move(x) for x in args), {k: move(v) for k, v in kwargs.items()})


def bench_call(target, args: tuple, kwargs: dict, *, device: str, guard=None):
    """One call without gradients, finished on the device when it returns: ``(output, peak)``.

    With ``guard``, the call runs under it and ``peak`` is its largest allocation (CPU) or
    ``max_memory_allocated`` above what was allocated before (CUDA); without, ``peak`` is None."""
    cuda = device.startswith("cuda")
    peak = None
    with torch.no_grad():
        if guard is None:
            out = plain(target(*args, **kwargs))
        else:
            if cuda:
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
                base = torch.cuda.memory_allocated()
            with guard:
                out = plain(target(*args, **kwargs))  # read as check reads it: no code of the kernel's runs after
            if cuda:
                torch.cuda.synchronize()
            peak = (torch.cuda.max_memory_allocated() - base) if cuda else guard.largest_bytes
        if cuda:
            torch.cuda.synchronize()
    return out, peak

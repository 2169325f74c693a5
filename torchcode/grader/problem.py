"""A problem on the trusted side: its hidden cases and reference loaded, one case prepared.

``prepare`` builds a case's inputs from the seed, runs the reference twice (float64 for the
expected values, the grading dtype for the tolerance) and packs what the worker gets.
"""

from __future__ import annotations

import importlib.util
import inspect
import random
import threading
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import torch

from torchcode.catalog.spec import ProblemSpec
from torchcode.errors import SpecError
from torchcode.grader import cases as caseapi
from torchcode.grader import execute, protocol
from torchcode.grader.protocol import AliasRef, ConstTensor, NamespaceValue, PrevRef, RefillRef
from torchcode.grader.result import CaseResult


REPLAY = "/replay"  # the seed variant of a case's second run with new values


@dataclass
class Prepared:
    case: caseapi.Case
    header: dict
    message: protocol.Message
    gold: execute.Execution
    ref: execute.Execution
    leaf_labels: list[str]
    ignore: dict = field(default_factory=dict)  # (step, path) -> mask
    params: tuple[str, ...] = ()  # the entry point's parameter names (function, or forward)
    replay: bool = False  # the case's second run, with new values
    spread: execute.Execution | None = None  # low precision: the reference on inputs a rounding unit away


def _import_file(path: Path, name: str, what: str):
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or not path.is_file():
        raise SpecError(path, None, f"the {what} file is missing", f"create {path}")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # noqa: BLE001 - author errors become one clear message
        lines = [f.lineno for f in traceback.extract_tb(e.__traceback__) if Path(f.filename).resolve() == path.resolve()]
        where = f" (line {lines[-1]})" if lines and not isinstance(e, SyntaxError) else ""  # a SyntaxError says it
        raise SpecError(path, None, f"the {what} failed to import: {type(e).__name__}: {e}{where}") from None
    return module


class Problem:
    """A spec with its hidden cases and reference kernel loaded (trusted side)."""

    def __init__(self, spec: ProblemSpec):
        self.spec = spec
        cases_mod = _import_file(spec.cases_path, f"torchcode_cases_{spec.id}", "hidden cases")
        self.cases = caseapi.collect(vars(cases_mod))
        if not self.cases:
            raise SpecError(spec.cases_path, None, "defines no case", "decorate case functions with @case")
        _check_case_dtypes(spec, self.cases)
        self.dims = _dims(spec, vars(cases_mod).get("DIMS"))
        self.bench_builder = caseapi.find_marked(vars(cases_mod), "__torchcode_benchmark__")
        self.baseline = caseapi.find_marked(vars(cases_mod), "__torchcode_baseline__")
        sol = _import_file(spec.solution_path, f"torchcode_solution_{spec.id}", "reference solution")
        self.reference = getattr(sol, spec.entry.name, None)
        if self.reference is None:
            raise SpecError(spec.solution_path, None, f"the reference does not define `{spec.entry.name}` (the [entry] "
                            "name in problem.toml)", f"name its {spec.entry.kind} `{spec.entry.name}`, or change "
                            "[entry] name")
        self._shapes: dict = {}  # the reference's parameter shapes, by constructor arguments
        self._built: dict[int, dict] = {}  # seed -> {(case, dtype, device, replay): Prepared}, the latest seeds
        self._built_lock = threading.Lock()  # a grade and the next one's cases (prepare_ahead) build at once
        e = spec.entry
        if e.is_module:
            self.calling = execute.Calling(e.params, _required(self.reference.forward, e.params, True),
                                           e.init, _required(self.reference.__init__, e.init, True))
        else:
            self.calling = execute.Calling(e.params, _required(self.reference, e.params, False))

    # -- building one case ------------------------------------------------------------------
    def _make(self, cdef: caseapi.CaseDef, seed: int, variant: str = "") -> caseapi.Case:
        """The author's case function, run; what it raises names the case, the line and the exception."""
        try:
            return cdef.make(seed, variant)
        except SpecError:
            raise
        except Exception as e:  # noqa: BLE001 - the author's code may raise anything
            path = Path(self.spec.cases_path).resolve()
            lines = [f.lineno for f in traceback.extract_tb(e.__traceback__) if Path(f.filename).resolve() == path]
            where = f" (line {lines[-1]})" if lines else ""
            raise SpecError(self.spec.cases_path, None, f"case '{cdef.name}' raised {type(e).__name__}: {e}{where}",
                            "fix that case function (run `torchcode validate` on the problem)") from None

    KEPT_SEEDS = 3  # the cases of this many seeds are kept: a class graded on one seed, `validate` on three (its
    # default) grade many files on the same cases (at most about 12 MB a seed, minimind_attention in every dtype)

    def prepare(self, cdef: caseapi.CaseDef, seed: int, dtype: str = "float32", device: str = "cpu",
                replay: bool = False) -> Prepared | None:
        """``build``, or the same case built earlier on the same seed (a Prepared is only ever read: the
        worker gets a copy of its tensors over the wire, and the verdict reads the expected values)."""
        key = (cdef.name, dtype, device, replay)
        with self._built_lock:
            kept = self._built.get(seed)
            if kept is not None and key in kept:
                return kept[key]
        prep = self.build(cdef, seed, dtype, device, replay)
        with self._built_lock:
            kept = self._built.pop(seed, None) or {}
            kept.setdefault(key, prep)
            self._built[seed] = kept  # the most recently used seed last
            while len(self._built) > self.KEPT_SEEDS:
                del self._built[next(iter(self._built))]
            return kept[key]

    def build(self, cdef: caseapi.CaseDef, seed: int, dtype: str = "float32", device: str = "cpu",
              replay: bool = False) -> Prepared | None:
        """Build a case and run the reference on it. ``replay``: the same case with new values (same shapes,
        same other arguments, new weights), forward only, or None when the case's shapes depend on the values."""
        if device == "cuda":
            from torchcode.grader.startup import no_cudnn_attention

            no_cudnn_attention()  # the reference's calls too (a plan per shape: seconds per case)
        variant = REPLAY if replay else ""
        c = self._make(cdef, seed, variant)
        inference = not c.grad  # a forward-only case calls under torch.no_grad(); its replay as its first run did
        if replay:
            if caseapi.structure(c) != caseapi.structure(self._make(cdef, seed)):
                return None
            c.grad = False  # a value kept from an earlier call shows in the outputs; half the cost without backward
        low = protocol.DTYPES[dtype]
        spec = self.spec
        _check_names(spec, c)
        if not spec.entry.is_module and any(s.new_instance for s in c.steps):
            raise SpecError(spec.cases_path, None, f"case '{c.name}' uses Call(...).fresh(), which only module problems "
                            "can use (a function has no instance)", "remove .fresh()")
        if not spec.entry.is_module and any(s.train is not None for s in c.steps):
            raise SpecError(spec.cases_path, None, f"case '{c.name}' uses Call(...).in_mode(), which only module "
                            "problems can use (a function has no mode)", "remove .in_mode()")
        for i, s in enumerate(c.steps):
            if s.updates and (not spec.entry.is_module or c.grad):
                raise SpecError(spec.cases_path, None, f"case '{c.name}' uses Call(...).updated() in call {i + 1}, which "
                                "only module problems can use, in a grad=False case (a training step runs backward "
                                "before it changes the weights)", "set grad=False, or remove .updated()")
        temporary = {i for i, s in enumerate(c.steps) if s.temporary}
        if temporary and c.grad:
            raise SpecError(spec.cases_path, None, f"case '{c.name}' uses Call(...).temporary_inputs(), which only a "
                            "grad=False case can use (gradients need the inputs kept)", "set grad=False")
        def named(v):  # every Refill and Alias in an argument, tuples walked
            if isinstance(v, (caseapi.Refill, caseapi.Alias)):
                yield v
            elif isinstance(v, (tuple, list)):
                for x in v:
                    yield from named(x)

        for i, s in enumerate(c.steps):
            for v in named((*s.args, *s.kwargs.values())):
                if v.step in temporary and v.step != i:
                    raise SpecError(spec.cases_path, None, f"case '{c.name}' call {i + 1} names an argument of call "
                                    f"{v.step + 1}, whose inputs are temporary (freed once it returns)",
                                    "remove .temporary_inputs() from that call, or the Refill/Alias")
        if not spec.entry.is_module and c.sibling is not None:
            raise SpecError(spec.cases_path, None, f"case '{c.name}' sets Case(sibling=...), which only module problems "
                            "can use (a function has no instance)", "remove sibling=")
        if type(c.time_factor) not in (int, float) or not 1 <= c.time_factor <= 10:
            raise SpecError(spec.cases_path, None, f"case '{c.name}' sets Case(time_factor={c.time_factor!r}): it "
                            "multiplies the per-case time limit", "give a number from 1 to 10")
        rng = caseapi.Rng(caseapi.case_seed(seed, c.name + "/weights" + variant))
        state = self.weights(c, rng)
        for name, value in (c.weights or {}).items():  # chosen by the case (e.g. scores of a known size and sign)
            if not isinstance(value, torch.Tensor):
                raise SpecError(spec.cases_path, None, f"case '{c.name}' gives weights['{name}'] as "
                                f"{type(value).__name__}, not a tensor", "give a tensor, e.g. rng.randn(...)")
            if name not in state or tuple(value.shape) != tuple(state[name].shape):
                raise SpecError(spec.cases_path, None, f"case '{c.name}' gives weights['{name}'] of shape "
                                f"{list(value.shape)}, but the reference has " + (
                                    f"shape {list(state[name].shape)}" if name in state else "no such parameter"),
                                "use the reference's parameter names and shapes")
            state[name] = value

        for i, s in enumerate(c.steps):  # weights the caller sets before a call: the reference's names and shapes
            for name, value in s.updates.items():
                if not isinstance(value, torch.Tensor) or name not in state or (
                        tuple(value.shape) != tuple(state[name].shape)):
                    raise SpecError(spec.cases_path, None, f"case '{c.name}' updates '{name}' before call {i + 1} with "
                                    "something other than a tensor of that parameter's shape",
                                    "use the reference's parameter names and shapes")
        layouts = self.layouts(cdef, c, seed)
        from_graph = self.from_graph(cdef, seed)

        def program(cast) -> execute.Program:
            prog = self.program(c, state, cast)
            prog.layouts, prog.inference, prog.from_graph = layouts, inference, from_graph
            return prog

        ignore = {(i, path): m for i, s in enumerate(c.steps) for path, m in s.ignore.items()}

        def make_cot(step, path, out):
            if not c.compare_grads and out.dim() > 0:  # the case's batch holds copies of one input, each with its own
                # dropout draw: one output gradient for every copy, so that the gradients, summed over the copies,
                # estimate their expectation (ungraded outputs included: there, ungraded means random)
                return rng.randn(1, *out.shape[1:], scale=0.125).expand(out.shape).clone()  # summed over 2048 copies:
                # an eighth keeps the weights' gradients far within float16's range
            cot = rng.randn(*out.shape)
            if (step, path) in ignore:
                cot = cot.masked_fill(ignore[(step, path)].expand(out.shape), 0.0)
            return cot

        # the grading dtype rounds the inputs; gold is float64 on exactly those rounded values
        to_low = lambda t: t.to(low) if t.is_floating_point() else t.clone()  # noqa: E731
        to64 = lambda t: t.to(low).double() if t.is_floating_point() else t.clone()  # noqa: E731
        gold_prog, ref_prog = program(to64), program(to_low)
        try:
            gold = execute.run(self.reference, spec.entry.is_module, gold_prog, execute.Stage(),
                               dtype=torch.float64, make_cotangent=make_cot)
            ref_prog.cotangents = {k: v.to(low) for k, v in gold_prog.cotangents.items()}
            ref = execute.run(self.reference, spec.entry.is_module, ref_prog, execute.Stage(), dtype=low, device=device)
            spread = None
            if dtype in LOW_PRECISION:
                nudge = _nudge(low, caseapi.case_seed(seed, c.name + "/spread" + variant))
                spread_prog = program(nudge)
                spread_prog.cotangents = ref_prog.cotangents
                spread = _cpu(execute.run(self.reference, spec.entry.is_module, spread_prog, execute.Stage(), dtype=low,
                                          device=device))
        except Exception as e:  # noqa: BLE001
            raise SpecError(spec.solution_path, None,
                            f"the reference failed on case '{c.name}': {type(e).__name__}: {e}") from None

        header, msg = self.message(c, state, to_low)
        header.update({
            "op": "case",
            "grad": c.grad, "inference": inference, "train": c.train, "max_elements": c.max_intermediate, "dtype": dtype, "device": device,
            "measured": any(v is not None for v in (c.max_intermediate, c.max_reduction, c.max_work_exponent, c.max_work)),
            "layouts": list(layouts),
            "from_graph": from_graph,
            # the optional parameters given, by position in about half the cases (by keyword in the others), and the
            # other way in each case's replay: every passing case is called both ways, as callers may
            "positional": (caseapi.case_seed(seed, cdef.name + "/positional") % 2 == 0) != replay,
            "cotangents": [{"step": s, "path": list(p), "t": msg.tensor(t)} for (s, p), t in ref_prog.cotangents.items()],
            # the form of each output a later call is handed (a Prev): one of another form is a wrong output, said so
            "forms": {str(i): execute.form(ref.outputs[i]) for i in sorted(_prev_steps(c))},
        })
        if dtype != "float32":
            c.name = f"{c.name} [{dtype}]"
        return Prepared(c, header, msg, _cpu(gold), _cpu(ref), _leaf_labels(c, spec.entry.params), ignore,
                        tuple(spec.entry.params), replay, spread)

    def layouts(self, cdef: caseapi.CaseDef, c: caseapi.Case, seed: int) -> tuple[str, ...]:
        """The memory layout of each input tensor: real callers pass transposed views and slices.

        In every check half the cases (chosen by the seed; at least one) get contiguous inputs, as most callers
        pass; in every other case every input tensor with a dim gets a non-contiguous layout, cycling through those
        that fit its dims. (One contiguous case per check let a fast path taken only for contiguous inputs go
        unseen on most seeds.)"""
        dims = execute.input_dims(self.program(c, {}, lambda t: t).steps)
        n = len(self.cases)
        if next((i for i, d in enumerate(self.cases) if d.name == cdef.name), -1) in random.Random(seed).sample(
                range(n), max(1, n // 2)):
            return ("contiguous",) * len(dims)
        h = caseapi.case_seed(seed, cdef.name + "/layout")
        return tuple(execute.layouts_for(nd)[(h + k) % len(execute.layouts_for(nd))] if nd else "contiguous"
                     for k, nd in enumerate(dims))

    def from_graph(self, cdef: caseapi.CaseDef, seed: int) -> bool:
        """Whether the inputs that get a gradient are handed as the output of an earlier layer (a view of the leaf
        whose gradient is read, its grad_fn set), as a model's layer gets them: in half the cases (by the seed),
        leaves in the others. (Right only for leaves was accepted: `if x.grad_fn is None`, attack32.)"""
        n = len(self.cases)
        k = next((i for i, d in enumerate(self.cases) if d.name == cdef.name), -1)
        return k in random.Random(caseapi.case_seed(seed, "/graph")).sample(range(n), n // 2)

    def weights(self, c: caseapi.Case, rng: caseapi.Rng) -> dict[str, torch.Tensor]:
        """Random weights for a module case, by the reference's parameter names (empty for functions)."""
        if not self.spec.entry.is_module:
            return {}
        key = caseapi.signature(c.init)
        if key not in self._shapes:
            init = {k: execute.materialize(_as_program(v, lambda t: t)) for k, v in (c.init or {}).items()}
            with torch.random.fork_rng(devices=[]):
                self._shapes[key] = [(n, p.shape) for n, p in self.reference(**init).named_parameters()]
        shapes = self._shapes[key]
        return {n: rng.randn(*shape, scale=shape[-1] ** -0.5) for n, shape in shapes}

    def program(self, c: caseapi.Case, state: dict, cast) -> execute.Program:
        return execute.Program(
            init={k: _as_program(v, cast) for k, v in c.init.items()} if c.init is not None else None,
            state={k: cast(v) for k, v in state.items()},
            steps=[(tuple(_as_program(a, cast) for a in s.args), {k: _as_program(v, cast) for k, v in s.kwargs.items()})
                   for s in c.steps],
            grad=c.grad, train=c.train, fresh=frozenset(i for i, s in enumerate(c.steps) if s.new_instance),
            temporary=frozenset(i for i, s in enumerate(c.steps) if s.temporary),
            modes={i: s.train for i, s in enumerate(c.steps) if s.train is not None},
            sibling={k: _as_program(v, cast) for k, v in c.sibling.items()} if c.sibling is not None else None,
            updates={i: {k: cast(v) for k, v in s.updates.items()} for i, s in enumerate(c.steps) if s.updates},
            calling=self.calling)

    def message(self, c: caseapi.Case, state: dict, cast) -> tuple[dict, protocol.Message]:
        """The wire form of a case's construction and calls, tensors cast for the worker."""
        msg = protocol.Message()
        header = {
            "init": {k: msg.value(v) for k, v in c.init.items()} if c.init is not None else None,
            "state": {k: msg.tensor(cast(v)) for k, v in state.items()},
            "steps": [{"args": [msg.value(_cast(a, cast)) for a in s.args],
                       "kwargs": {k: msg.value(_cast(v, cast)) for k, v in s.kwargs.items()},
                       **({"fresh": True} if s.new_instance else {}),
                       **({"temporary": True} if s.temporary else {}),
                       **({"train": s.train} if s.train is not None else {}),
                       **({"weights": {k: msg.tensor(cast(v)) for k, v in s.updates.items()}} if s.updates else {})}
                      for s in c.steps],
            **({"sibling": {k: msg.value(v) for k, v in c.sibling.items()}} if c.sibling is not None else {}),
        }
        return header, msg

    # -- judging one case -----------------------------------------------------------------------

    def judge(self, p: Prepared, reply: dict, tensors: list[torch.Tensor], notes=None) -> CaseResult:
        from torchcode.grader import defaults
        from torchcode.grader.result import Verdict
        from torchcode.grader.verdict import judge_case

        res = judge_case(self.spec.grading, p, reply, tensors, notes, self.dims)
        # a forward set on the instance gives callers its own defaults (the worker read them after the case)
        wrong = defaults.reported_problem(reply.get("defaults"), self.spec.entry, self.reference) if (
            isinstance(reply, dict) and "error" not in reply) else None
        if wrong and res.verdict is not Verdict.CRASHED:
            res.verdict, res.message, res.mismatch = Verdict.BAD_INTERFACE, wrong, None
        return res


def _dims(spec: ProblemSpec, dims) -> dict[str, tuple[str, ...]]:
    """cases.py's optional DIMS: {"output": ("query position", "feature"), "K": ("key position", "feature")}, the
    names of each tensor's last dimensions (by output label or input name), used in messages."""
    if dims is None:
        return {}
    if not (isinstance(dims, dict) and all(isinstance(k, str) and isinstance(v, tuple) and v
                                           and all(isinstance(x, str) and x for x in v) for k, v in dims.items())):
        raise SpecError(spec.cases_path, None, "DIMS is not a dict of names to tuples of dimension names",
                        'e.g. DIMS = {"output": ("query position", "feature")}')
    return dict(dims)


def _check_case_dtypes(spec: ProblemSpec, defs: list) -> None:
    """``@case(dtypes=...)`` names dtypes the problem declares: a misspelt one (``"bf16"``), or a bare string
    (``dtypes=("bfloat16")``: its letters), left a case that silently never ran."""
    from torchcode.catalog.spec import DTYPES

    declared = list(spec.grading.dtypes)
    for d in defs:
        if d.dtypes is None:
            continue
        unknown = [t for t in d.dtypes if t not in DTYPES]
        if unknown or not any(t in declared for t in d.dtypes):
            said = f"names {unknown[0]!r}, not a dtype" if unknown else f"names none of the problem's dtypes {declared}"
            raise SpecError(spec.cases_path, None, f"case '{d.name}': @case(dtypes=...) {said}, so it would never run",
                            f"name some of {declared} (grading.dtypes in problem.toml) in a tuple, e.g. "
                            f"dtypes=({declared[0]!r},) with its comma")


def _check_names(spec: ProblemSpec, c: caseapi.Case) -> None:
    """A Call or an init naming an argument the entry point does not take (a typo: `slope` for `slopes`) is the
    case's mistake, said in the author's terms, not a TypeError blamed on the reference."""
    import difflib

    e = spec.entry
    if not c.steps:  # nothing is called: every submission, the stub included, would pass it
        raise SpecError(spec.cases_path, None, f"case '{c.name}' has no steps", "give it at least one Call(...)")
    where = f"{e.name}.forward" if e.is_module else e.name
    given = [(f"step {i}", where, e.params, len(s.args), s.kwargs) for i, s in enumerate(c.steps)]
    if e.is_module and isinstance(c.init, dict):
        given.append(("init", f"{e.name}.__init__", e.init, 0, c.init))
    if e.is_module and isinstance(c.sibling, dict):
        given.append(("sibling", f"{e.name}.__init__", e.init, 0, c.sibling))
    for step, fn, names, positional, kwargs in given:
        if positional > len(names):
            raise SpecError(spec.cases_path, None, f"case '{c.name}' ({step}) passes {positional} arguments to {fn}, "
                            f"which takes {len(names)}: ({', '.join(names)})", "pass one value per parameter of "
                            "[entry] in problem.toml")
        for key in kwargs:
            if key not in names:
                close = [n for n in names if n.lower() == key.lower()] or difflib.get_close_matches(key, names, n=1)
                raise SpecError(spec.cases_path, None, f"case '{c.name}' ({step}) passes `{key}=`, which {fn} does not "
                                f"take: its parameters are ({', '.join(names)})",
                                f"did you mean `{close[0]}=`?" if close else "use the names of [entry] in problem.toml")
            if names.index(key) < positional:
                raise SpecError(spec.cases_path, None, f"case '{c.name}' ({step}) passes `{key}` both by position "
                                f"and as `{key}=`", "pass it once")


def _required(fn, names: tuple[str, ...], skip_self: bool) -> int:
    """How many leading contract parameters the reference takes without a default: callers pass those by
    position (any names will do for the learner) and the optional rest by keyword (names checked)."""
    try:
        params = list(inspect.signature(fn).parameters.values())[1 if skip_self else 0:]
    except (TypeError, ValueError):
        return len(names)
    n = 0
    for p, name in zip(params, names):
        if p.name != name or p.default is not p.empty or p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            break
        n += 1
    return n


# Low precision: an honest kernel that rounds its intermediates differently from the reference lands as far
# from gold as the reference does on inputs nudged by a rounding unit. Where the outputs are ill-conditioned
# (large scores make softmax nearly one-hot), that is much farther than the reference's own error, and a
# correct kernel must not be rejected for it; the semantics are graded in float32, where nothing is nudged.
LOW_PRECISION = ("bfloat16", "float16")


def _nudge(low: torch.dtype, seed: int):
    """A cast to ``low`` that moves each floating value up or down by about one rounding unit (or leaves it)."""
    gen = torch.Generator().manual_seed(seed)
    eps = torch.finfo(low).eps

    def cast(t: torch.Tensor) -> torch.Tensor:
        if not t.is_floating_point():
            return t.clone()
        step = torch.randint(-1, 2, t.shape, generator=gen).to(torch.float32) * eps
        return (t.to(low).float() * (1 + step)).to(low)

    return cast


def _cpu(ex: execute.Execution) -> execute.Execution:
    """The reference's results on the CPU (comparison happens there); device tensors are copied once."""
    def move(v):
        if isinstance(v, torch.Tensor):
            return v.detach().cpu()
        if isinstance(v, (tuple, list)):
            return tuple(move(x) for x in v)
        return v

    return execute.Execution(outputs=[move(o) for o in ex.outputs],
                             input_grads={k: move(v) for k, v in ex.input_grads.items()},
                             param_grads={k: move(v) for k, v in ex.param_grads.items()})


def _prev_steps(c: caseapi.Case) -> set[int]:
    """The calls whose output a later call is handed (a ``Prev`` among its arguments, tuples walked)."""
    found: set[int] = set()

    def walk(v):
        if isinstance(v, caseapi.Prev):
            found.add(v.step)
        elif isinstance(v, (tuple, list)):
            for x in v:
                walk(x)
        elif isinstance(v, caseapi.Config):
            for x in v.fields.values():
                walk(x)

    for s in c.steps:
        for v in (*s.args, *s.kwargs.values()):
            walk(v)
    return found


def _as_program(v, cast):
    if isinstance(v, torch.Tensor):
        return cast(v)
    if isinstance(v, caseapi.Const):
        return ConstTensor(cast(v.tensor))
    if isinstance(v, caseapi.Prev):
        return PrevRef(v.step, v.path, v.view)
    if isinstance(v, caseapi.Refill):
        return RefillRef(v.step, v.arg, cast(v.tensor))
    if isinstance(v, caseapi.Alias):
        return AliasRef(v.step, v.arg)
    if isinstance(v, caseapi.Config):
        return NamespaceValue({k: _as_program(x, cast) for k, x in v.fields.items()})
    if isinstance(v, (tuple, list)):
        return tuple(_as_program(x, cast) for x in v)
    return v


def _cast(v, cast):
    """A case value with its tensors cast (for the wire; Prev and Config stay what they are)."""
    if isinstance(v, torch.Tensor):
        return cast(v)
    if isinstance(v, caseapi.Const):
        return caseapi.Const(cast(v.tensor))
    if isinstance(v, caseapi.Refill):
        return caseapi.Refill(v.step, v.arg, cast(v.tensor))
    if isinstance(v, (tuple, list)):
        return type(v)(_cast(x, cast) for x in v)
    return v


def _leaf_labels(c: caseapi.Case, params: tuple[str, ...]) -> list[str]:
    """Names of the input tensors in the order execute.run makes them leaves."""
    labels: list[str] = []
    again: dict = {}  # (call, argument) -> the other names the same tensor object was passed as (Alias)

    def name_of(i: int, key) -> str:
        suffix = f" (call {i + 1})" if len(c.steps) > 1 else ""
        return (key if isinstance(key, str) else params[key] if key < len(params) else f"argument {key + 1}") + suffix

    points = {(i, key): (v.step, v.arg) for i, s in enumerate(c.steps)
              for key, v in [*enumerate(s.args), *s.kwargs.items()] if isinstance(v, caseapi.Alias)}
    for here in points:  # in order: an Alias of an Alias names the tensor first given
        root = points[here]
        for _ in range(len(points)):
            if root not in points:
                break
            root = points[root]
        again.setdefault(root, []).append(name_of(*here))

    def walk(v, name, key=None):
        if isinstance(v, torch.Tensor):
            also = again.get(key, [])
            labels.append(f"{name} (the same tensor passed as {' and '.join(also)})" if also else name)
        elif isinstance(v, (tuple, list)):
            for j, x in enumerate(v):
                walk(x, f"{name}[{j}]")

    for i, s in enumerate(c.steps):
        for key, v in [*enumerate(s.args), *s.kwargs.items()]:
            walk(v, name_of(i, key), (i, key))
    return labels

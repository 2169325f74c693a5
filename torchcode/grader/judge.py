"""The trusted side of a check: prepare hidden cases, run the reference, drive the worker, decide.

Every verdict is computed here, from tensors the worker sent back as raw bytes and
from expected values the worker never saw.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import secrets
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from torchcode.catalog.spec import ProblemSpec
from torchcode.errors import SpecError, UsageError
from torchcode.grader import cases as caseapi
from torchcode.grader import compare, execute, protocol
from torchcode.grader.protocol import ConstTensor, NamespaceValue, PrevRef, Unsupported
from torchcode.grader.result import CaseResult, Mismatch, Report, Verdict, overall
from torchcode.grader.limits import Limits
from torchcode.grader.sandbox import WorkerProcess, Zygote

OUTPUT_SHOWN = 4000


@dataclass
class Prepared:
    case: caseapi.Case
    header: dict
    message: protocol.Message
    gold: execute.Execution
    ref: execute.Execution
    leaf_labels: list[str]
    ignore: dict = field(default_factory=dict)  # (step, path) -> mask


def _import_file(path: Path, name: str, what: str):
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or not path.is_file():
        raise SpecError(path, None, f"the {what} file is missing", f"create {path}")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # noqa: BLE001 - author errors become one clear message
        raise SpecError(path, None, f"the {what} failed to import: {type(e).__name__}: {e}") from None
    return module


class Problem:
    """A spec with its hidden cases and reference kernel loaded (trusted side)."""

    def __init__(self, spec: ProblemSpec):
        self.spec = spec
        cases_mod = _import_file(spec.cases_path, f"torchcode_cases_{spec.id}", "hidden cases")
        self.cases = caseapi.collect(vars(cases_mod))
        if not self.cases:
            raise SpecError(spec.cases_path, None, "defines no case", "decorate case functions with @case")
        self.bench_builder = caseapi.find_marked(vars(cases_mod), "__torchcode_benchmark__")
        self.baseline = caseapi.find_marked(vars(cases_mod), "__torchcode_baseline__")
        sol = _import_file(spec.solution_path, f"torchcode_solution_{spec.id}", "reference solution")
        self.reference = getattr(sol, spec.entry.name, None)
        if self.reference is None:
            raise SpecError(spec.solution_path, None, f"does not define {spec.entry.name}")

    # -- building one case ------------------------------------------------------------------
    def prepare(self, cdef: caseapi.CaseDef, seed: int, dtype: str = "float32", device: str = "cpu") -> Prepared:
        c = cdef.make(seed)
        low = protocol.DTYPES[dtype]
        spec = self.spec
        rng = caseapi.Rng(caseapi.case_seed(seed, c.name + "/weights"))
        state = self.weights(c, rng)

        def program(cast) -> execute.Program:
            return self.program(c, state, cast)

        ignore = {(i, path): m for i, s in enumerate(c.steps) for path, m in s.ignore.items()}

        def make_cot(step, path, out):
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
        except Exception as e:  # noqa: BLE001
            raise SpecError(spec.solution_path, None,
                            f"the reference failed on case '{c.name}': {type(e).__name__}: {e}") from None

        header, msg = self.message(c, state, to_low)
        header.update({
            "op": "case",
            "grad": c.grad, "train": c.train, "max_elements": c.max_intermediate, "dtype": dtype, "device": device,
            "cotangents": [{"step": s, "path": list(p), "t": msg.tensor(t)} for (s, p), t in ref_prog.cotangents.items()],
        })
        if dtype != "float32":
            c.name = f"{c.name} [{dtype}]"
        return Prepared(c, header, msg, _cpu(gold), _cpu(ref), _leaf_labels(c, spec.entry.params), ignore)

    def weights(self, c: caseapi.Case, rng: caseapi.Rng) -> dict[str, torch.Tensor]:
        """Random weights for a module case, by the reference's parameter names (empty for functions)."""
        if not self.spec.entry.is_module:
            return {}
        init = {k: execute.materialize(_as_program(v, lambda t: t)) for k, v in (c.init or {}).items()}
        with torch.random.fork_rng(devices=[]):
            shapes = [(n, p.shape) for n, p in self.reference(**init).named_parameters()]
        return {n: rng.randn(*shape, scale=shape[-1] ** -0.5) for n, shape in shapes}

    def program(self, c: caseapi.Case, state: dict, cast) -> execute.Program:
        return execute.Program(
            init={k: _as_program(v, cast) for k, v in c.init.items()} if c.init is not None else None,
            state={k: cast(v) for k, v in state.items()},
            steps=[(tuple(_as_program(a, cast) for a in s.args), {k: _as_program(v, cast) for k, v in s.kwargs.items()})
                   for s in c.steps],
            grad=c.grad, train=c.train)

    def message(self, c: caseapi.Case, state: dict, cast) -> tuple[dict, protocol.Message]:
        """The wire form of a case's construction and calls, tensors cast for the worker."""
        msg = protocol.Message()
        header = {
            "init": {k: msg.value(v) for k, v in c.init.items()} if c.init is not None else None,
            "state": {k: msg.tensor(cast(v)) for k, v in state.items()},
            "steps": [{"args": [msg.value(_cast(a, cast)) for a in s.args],
                       "kwargs": {k: msg.value(_cast(v, cast)) for k, v in s.kwargs.items()}} for s in c.steps],
        }
        return header, msg

    # -- judging one case -----------------------------------------------------------------------
    def judge(self, p: Prepared, reply: dict, tensors: list[torch.Tensor]) -> CaseResult:
        c, pol = p.case, self.spec.grading
        res = CaseResult(c.name, Verdict.ACCEPTED, targets=c.targets, seconds=float(reply.get("seconds", 0.0) or 0.0))
        if "error" in reply:
            return _error_result(res, reply["error"])
        largest = int(reply.get("largest") or 0)
        if c.max_intermediate is not None and largest >= c.max_intermediate:
            shape = " x ".join(map(str, reply.get("largest_shape") or [])) or "?"
            res.verdict = Verdict.TOO_MUCH_MEMORY
            res.message = (f"your code created a tensor of shape ({shape}), {largest:,} elements; this case allows fewer than "
                           f"{c.max_intermediate:,}" + (f" ({c.intermediate_hint})" if c.intermediate_hint else "")
                           + ". Compute the result without materialising a tensor that grows with S x S.")
            return res
        try:
            outputs = [_learner_value(v, tensors) for v in reply["outputs"]]
            in_grads = {int(k): _learner_value(v, tensors) for k, v in reply["input_grads"].items()}
            p_grads = {str(k): _learner_value(v, tensors) for k, v in reply["param_grads"].items()}
        except (KeyError, TypeError, ValueError, protocol.ProtocolError):
            res.verdict, res.message = Verdict.CRASHED, "the worker sent back a malformed result"
            return res
        if len(outputs) != len(c.steps):
            res.verdict, res.message = Verdict.CRASHED, "the worker sent back the wrong number of results"
            return res
        multi = len(c.steps) > 1
        flat_learner = [execute.flatten(o) for o in outputs]
        flat_gold = [execute.flatten(o) for o in p.gold.outputs]
        flat_ref = [execute.flatten(o) for o in p.ref.outputs]

        # 1. structure, type, shape, dtype, device
        for i, (lo, go, ro) in enumerate(zip(outputs, p.gold.outputs, p.ref.outputs)):
            problem = _structure_problem(lo, go, ro, device=p.header["device"])
            if problem:
                res.verdict = Verdict.WRONG_DEVICE if " on device " in problem else Verdict.WRONG_OUTPUT
                res.message = (f"in call {i + 1}: " if multi else "") + problem
                return res

        # 2. NaN / Inf
        for i, (lo, go) in enumerate(zip(flat_learner, flat_gold)):
            for path, g in go.items():
                t = lo[path]
                if isinstance(g, torch.Tensor) and g.is_floating_point():
                    bad = ~torch.isfinite(t.tensor) & torch.isfinite(g)
                    if (i, path) in p.ignore:
                        bad &= ~p.ignore[(i, path)].expand_as(bad)
                    if bad.any():
                        idx = [int(x) for x in torch.nonzero(bad)[0]]
                        res.verdict = Verdict.WRONG_ANSWER
                        res.message = (f"{_label(path, i, multi)} contains {t.tensor[tuple(idx)].item()} at {idx} where the "
                                       "expected value is finite. NaN/inf come from exp() of large scores (subtract each "
                                       "row's maximum, or use torch.softmax) or from a row whose keys are all masked "
                                       "(check which keys each query may see).")
                        return res

        # 3. the properties the variant is about, on the learner's own outputs
        learner_t = [{k: v.tensor for k, v in fl.items() if isinstance(v, _LT)} for fl in flat_learner]
        for chk in c.checks:
            a, b = chk.a.resolve(learner_t), chk.b.resolve(learner_t)
            ra, rb = chk.a.resolve(flat_ref), chk.b.resolve(flat_ref)
            gb = chk.b.resolve(flat_gold)
            allowed = (pol.factor * compare.property_error(ra, rb) + pol.floor * gb.detach().abs().max().item()
                       + compare.atol_for(ra.dtype))
            err = compare.property_error(a, b)
            if a.shape != b.shape or not err <= allowed:
                res.verdict = Verdict.WRONG_ANSWER
                res.message = chk.because + (f" (outputs differ by {err:.3g}; allowed {allowed:.2g})" if a.shape == b.shape else "")
                return res

        # 4. values
        for i, (lo, go, ro) in enumerate(zip(flat_learner, flat_gold, flat_ref)):
            for path, g in go.items():
                if not (isinstance(g, torch.Tensor) and g.is_floating_point()):
                    continue
                m = compare.compare(_label(path, i, multi), lo[path].tensor, g, ro[path],
                                    factor=pol.factor, floor=pol.floor, ignore=p.ignore.get((i, path)))
                if m:
                    return _wrong(res, m)

        # 5. gradients
        if c.grad:
            for idx, g in p.gold.input_grads.items():
                m = self._grad(f"gradient of {p.leaf_labels[idx]}", in_grads.get(idx), g, p.ref.input_grads.get(idx))
                if m:
                    return _wrong(res, m) if isinstance(m, Mismatch) else _no_grad(res, m)
            for name, g in p.gold.param_grads.items():
                m = self._grad(f"gradient of {name}", p_grads.get(name), g, p.ref.param_grads.get(name))
                if m:
                    return _wrong(res, m) if isinstance(m, Mismatch) else _no_grad(res, m)
        return res

    def _grad(self, what, got, gold, ref):
        if gold is None or ref is None:
            return None
        if got is None or not isinstance(got, _LT):
            return what if gold.abs().max().item() > 0 else None
        if tuple(got.tensor.shape) != tuple(gold.shape):
            return None
        pol = self.spec.grading
        return compare.compare(what, got.tensor, gold, ref, factor=pol.factor, floor=pol.floor)


# -- helpers ---------------------------------------------------------------------------------------
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


class _LT:
    """A tensor the learner returned, with the device it was on."""

    def __init__(self, tensor: torch.Tensor, device: str):
        self.tensor, self.device = tensor, device


def _learner_value(v, tensors):
    if v is None:
        return None
    if isinstance(v, dict) and "T" in v:
        i = v["T"]
        if not isinstance(i, int) or not 0 <= i < len(tensors):
            raise protocol.ProtocolError("bad tensor index")
        return _LT(tensors[i], str(v.get("device", "cpu")))
    if isinstance(v, dict) and "L" in v and isinstance(v["L"], list):
        return tuple(_learner_value(x, tensors) for x in v["L"])
    if isinstance(v, dict) and isinstance(v.get("X"), str):
        return Unsupported(v["X"][:200])
    raise protocol.ProtocolError("bad value")


def _as_program(v, cast):
    if isinstance(v, torch.Tensor):
        return cast(v)
    if isinstance(v, caseapi.Const):
        return ConstTensor(cast(v.tensor))
    if isinstance(v, caseapi.Prev):
        return PrevRef(v.step, v.path)
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
    if isinstance(v, (tuple, list)):
        return type(v)(_cast(x, cast) for x in v)
    return v


def _leaf_labels(c: caseapi.Case, params: tuple[str, ...]) -> list[str]:
    """Names of the input tensors in the order execute.run makes them leaves."""
    labels: list[str] = []

    def walk(v, name):
        if isinstance(v, torch.Tensor):
            labels.append(name)
        elif isinstance(v, (tuple, list)):
            for j, x in enumerate(v):
                walk(x, f"{name}[{j}]")

    for i, s in enumerate(c.steps):
        suffix = f" (call {i + 1})" if len(c.steps) > 1 else ""
        for j, a in enumerate(s.args):
            walk(a, (params[j] if j < len(params) else f"argument {j + 1}") + suffix)
        for k, v in s.kwargs.items():
            walk(v, k + suffix)
    return labels


def _label(path, step, multi) -> str:
    name = "output" + "".join(f"[{i}]" for i in path)
    return name + (f" of call {step + 1}" if multi else "")


def _describe(v) -> str:
    if isinstance(v, _LT):
        return f"a tensor of shape {list(v.tensor.shape)}"
    if isinstance(v, tuple) and v:
        return f"a tuple of {len(v)} items"
    if isinstance(v, Unsupported):
        return f"a {v}"
    if v is None:
        return "None"
    if v == ():
        return "an empty tuple"
    return type(v).__name__


def _structure_problem(got, gold, ref, label: str = "output", device: str = "cpu") -> str | None:
    """Compare what the learner returned with the reference's structure, recursively."""
    if isinstance(gold, (tuple, list)):
        if not isinstance(got, tuple):
            return f"{label} should be a tuple of {len(gold)} items, got {_describe(got)}"
        if len(got) != len(gold):
            return f"{label} should be a tuple of {len(gold)} items, got a tuple/list of {len(got)}"
        for i, (a, b, r) in enumerate(zip(got, gold, ref)):
            problem = _structure_problem(a, b, r, f"{label}[{i}]", device)
            if problem:
                return problem
        return None
    if gold is None:
        return None if got is None else f"{label} should be None, got {_describe(got)}"
    if not isinstance(got, _LT):
        hint = " (convert numpy arrays back with torch.from_numpy, or better, stay in torch)" if "numpy" in str(got) else ""
        return f"{label} should be a torch.Tensor, got {_describe(got)}{hint}"
    t = got.tensor
    if tuple(t.shape) != tuple(ref.shape):
        return f"{label} has shape {list(t.shape)}, expected {list(ref.shape)}"
    if t.dtype != ref.dtype:
        return f"{label} has dtype {t.dtype}, expected {ref.dtype} (keep the inputs' dtype)"
    if got.device.split(":")[0] != device:
        return f"{label} is on device {got.device}, expected {device} (keep the inputs' device)"
    return None


def _wrong(res: CaseResult, m: Mismatch) -> CaseResult:
    res.verdict, res.mismatch = Verdict.WRONG_ANSWER, m
    res.message = (f"{m.what} does not match the reference: {m.bad:,} of {m.total:,} elements are off, "
                   f"worst at index {m.index} (expected {m.expected:.6g}, got {m.got:.6g})")
    return res


def _no_grad(res: CaseResult, what: str) -> CaseResult:
    res.verdict = Verdict.WRONG_ANSWER
    res.message = (f"no {what} reached the input: part of your computation is cut off from autograd "
                   "(.detach(), .data, .item(), torch.no_grad(), or building a new tensor from values)")
    return res


_ERROR_VERDICTS = {
    "syntax": Verdict.SYNTAX_ERROR, "interface": Verdict.BAD_INTERFACE, "not_implemented": Verdict.NOT_IMPLEMENTED,
    "forbidden": Verdict.FORBIDDEN_CALL, "runtime": Verdict.RUNTIME_ERROR, "memory": Verdict.MEMORY_LIMIT,
    "device": Verdict.WRONG_DEVICE,
}


def _error_result(res: CaseResult, err: dict) -> CaseResult:
    kind = err.get("kind") if isinstance(err, dict) else None
    res.verdict = _ERROR_VERDICTS.get(kind, Verdict.RUNTIME_ERROR)
    res.traceback = str(err.get("traceback", ""))[:8000] if isinstance(err, dict) else ""
    msg = str(err.get("message", "")) if isinstance(err, dict) else ""
    if res.verdict is Verdict.NOT_IMPLEMENTED:
        msg = f"your code still raises NotImplementedError {err.get('stage', '')}: replace the TODOs with your implementation"
    elif res.verdict is Verdict.WRONG_DEVICE:
        msg += ". Create helper tensors (masks, aranges, zeros) on the inputs' device: device=x.device"
    elif res.verdict is Verdict.MEMORY_LIMIT:
        msg = (f"your code ran out of memory {err.get('stage', '')}: the worker may use at most {{memory_mb}} MB "
               "(--memory-limit). Look for a tensor far larger than the inputs.")
    elif res.verdict is Verdict.FORBIDDEN_CALL:
        names = err.get("names") or []
        msg = (f"your code used {', '.join(names)}, which this problem forbids: write it yourself from basic tensor ops"
               if names else msg)
    res.message = msg[:2000]
    return res


# -- the public entry points ------------------------------------------------------------------------------
class Grader:
    """Grades submissions; holds the zygote, so N submissions cost one torch import.

    Create it before this process runs any tensor op (the zygote is forked from here).
    """

    def __init__(self, limits: Limits | None = None):
        self.limits = limits or Limits()
        self.zygote = Zygote()
        self._problems: dict[str, Problem] = {}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        self.zygote.close()

    def problem(self, spec: ProblemSpec) -> Problem:
        key = str(spec.folder)
        if key not in self._problems:
            self._problems[key] = Problem(spec)
        return self._problems[key]

    def _spawn(self, spec: ProblemSpec, path: Path, tmp: Path) -> WorkerProcess:
        """A fresh worker whose output goes to tmp/output.txt and whose scratch directory is tmp/cwd."""
        lim = self.limits
        (tmp / "cwd").mkdir()
        return self.zygote.spawn({"log": str(tmp / "output.txt"), "cwd": str(tmp / "cwd"), "memory_mb": lim.memory_mb,
                                  "device": lim.device, "output_bytes": lim.output_bytes, "threads": lim.threads,
                                  "path": str(path), "confine": lim.confine, "protected": protected_paths(spec)})

    @staticmethod
    def _send_load(worker: WorkerProcess, spec: ProblemSpec, path: Path) -> None:
        e = spec.entry
        worker.send(protocol.Message(), {"op": "load", "path": str(path), "forbidden": list(spec.forbidden),
                                         "entry": {"kind": e.kind, "name": e.name, "params": list(e.params),
                                                   "init": list(e.init)}})

    @contextlib.contextmanager
    def loaded_worker(self, spec: ProblemSpec, path: Path):
        """A worker with the learner's file imported (for bench; the file has already been graded)."""
        with tempfile.TemporaryDirectory(prefix="torchcode-") as tmp:
            worker = self._spawn(spec, path, Path(tmp))
            try:
                self._send_load(worker, spec, path)
                reply, _ = worker.receive(self.limits.load_limit)
                if "error" in reply:
                    raise UsageError(f"{path} could not be loaded: {reply['error'].get('message', '')}")
                yield worker
            finally:
                worker.kill()
                worker.finish()

    def grade(self, spec: ProblemSpec, path: Path | str, *, seed: int | None = None,
              only: list[str] | None = None, dtypes: list[str] | None = None) -> Report:
        path = Path(path).resolve()
        if not path.is_file():
            raise UsageError(f"no such file: {path}")
        source = path.read_bytes()
        seed = secrets.randbelow(2**31) if seed is None else int(seed)
        t0 = time.perf_counter()
        lim = self.limits
        per_case = lim.time_limit or spec.grading.time_limit
        report = Report(problem=spec.id, file=str(path), verdict=Verdict.ACCEPTED, seed=seed,
                        sha256=hashlib.sha256(source).hexdigest(),
                        limits={"time_per_case_s": per_case, "total_s": lim.total_limit, "load_s": lim.load_limit,
                                "memory_mb": lim.memory_mb, "output_bytes": lim.output_bytes, "processes": 0},
                        device=lim.device, dtypes=list(dtypes or default_dtypes(spec, lim.device)))
        with tempfile.TemporaryDirectory(prefix="torchcode-") as tmp:
            log = Path(tmp) / "output.txt"
            worker = self._spawn(spec, path, Path(tmp))
            try:
                self._run(worker, spec, path, seed, per_case, report, only, report.dtypes)
            finally:
                worker.kill()
                info = worker.finish()
                report.output = _read_output(log)
        fill = {"{exit}": info.describe(), "{memory_mb}": str(lim.memory_mb)}
        for obj in [report, *report.cases]:
            for key, value in fill.items():
                obj.message = obj.message.replace(key, value)
        report.seconds = time.perf_counter() - t0
        return report

    def _run(self, worker: WorkerProcess, spec, path, seed, per_case, report: Report, only, dtypes) -> None:
        lim = self.limits
        started = time.perf_counter()
        problem = self.problem(spec)
        defs = [(d, dt) for dt in dtypes for d in problem.cases if not only or d.name in only]
        self._send_load(worker, spec, path)
        first = problem.prepare(defs[0][0], seed, defs[0][1], lim.device) if defs else None  # overlaps the worker's import
        t_load = time.perf_counter()
        try:
            reply, _ = worker.receive(lim.load_limit)
        except protocol.Timeout:
            report.verdict = Verdict.TIME_LIMIT
            report.message = f"importing your file took longer than {lim.load_limit:g} s: is there a loop or a long computation at the top level?"
            report.cases = [CaseResult(d.name, Verdict.NOT_RUN, targets=d.targets) for d, _ in defs]
            return
        except (protocol.PeerClosed, protocol.ProtocolError):
            report.verdict = Verdict.CRASHED
            report.message = "your code's process {exit} while your file was being imported (sys.exit, os._exit or a crash at the top level?)"
            report.cases = [CaseResult(d.name, Verdict.NOT_RUN, targets=d.targets) for d, _ in defs]
            return
        report.load_seconds = float(reply.get("seconds", time.perf_counter() - t_load) or 0.0)
        if isinstance(reply.get("confined"), dict):
            report.limits["confined"] = {str(k): bool(v) for k, v in reply["confined"].items()}
        if "error" in reply:
            r = _error_result(CaseResult("import", Verdict.RUNTIME_ERROR), reply["error"])
            report.verdict, report.message = r.verdict, r.message
            report.cases = [CaseResult(d.name, Verdict.NOT_RUN, targets=d.targets) for d, _ in defs]
            if r.traceback:
                report.cases.insert(0, CaseResult("import", r.verdict, message=r.message, traceback=r.traceback))
            return
        dead = None
        for k, (d, dtype) in enumerate(defs):
            if dead:
                report.cases.append(CaseResult(d.name, Verdict.NOT_RUN, targets=d.targets,
                                               message=f"not run: {dead}"))
                continue
            prep = first if k == 0 else problem.prepare(d, seed, dtype, lim.device)
            t = time.perf_counter()
            left = lim.total_limit - (t - started)
            limit = min(per_case, max(left, 0.0))
            try:
                worker.send(prep.message, prep.header)
                reply, tensors = worker.receive(limit)
            except protocol.Timeout:
                worker.kill()
                which = (f"{per_case:g} s, the time limit per case" if limit == per_case
                         else f"{lim.total_limit:g} s, the time limit for the whole check")
                report.cases.append(CaseResult(d.name, Verdict.TIME_LIMIT, targets=prep.case.targets, seconds=limit,
                                               message=f"still running after {which}: look for an endless loop, "
                                                       "or a Python loop over every element"))
                dead = "an earlier case hit the time limit"
                continue
            except (protocol.PeerClosed, protocol.ProtocolError, BrokenPipeError, ConnectionResetError):
                report.cases.append(CaseResult(d.name, Verdict.CRASHED, targets=prep.case.targets,
                                               seconds=time.perf_counter() - t,
                                               message="your code's process {exit} during this case without returning "
                                                       "a result (os._exit, sys.exit in a thread, a segfault, or running "
                                                       f"out of memory; the limit is {lim.memory_mb} MB)"))
                dead = "an earlier case crashed the process"
                continue
            report.cases.append(problem.judge(prep, reply, tensors))
        report.verdict = overall(report.cases)
        first_bad = next((c for c in report.cases if c.verdict is report.verdict), None)
        report.message = first_bad.message if first_bad and not report.passed else ""


def default_dtypes(spec: ProblemSpec, device: str) -> list[str]:
    """float32 on the CPU; on a GPU every dtype the problem declares (low precision is a GPU matter)."""
    return list(spec.grading.dtypes) if device == "cuda" else ["float32"]


def resolve_device(name: str) -> str:
    """'auto' -> 'cuda' when available, else 'cpu'; 'cuda' without a GPU is an error."""
    import torch

    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise UsageError("--device cuda: no CUDA device is available here (torch.cuda.is_available() is False; "
                         f"torch {torch.__version__}). Use --device cpu.")
    if name not in ("cpu", "cuda"):
        raise UsageError(f"--device must be auto, cpu or cuda, not {name!r}")
    return name


def protected_paths(spec: ProblemSpec) -> list[str]:
    """What a submission may not read or write: the grader, every pack's problems, the user's state."""
    from torchcode import paths

    packs = {spec.pack, paths.builtin_pack(), *(p.expanduser().resolve() for p in paths.extra_packs())}
    dirs = [paths.PACKAGE_DIR, paths.home()]
    dirs += [pack / sub for pack in packs for sub in ("problems", "solutions", "templates")]
    return [str(d) for d in dirs]


def _read_output(log: Path) -> str:
    try:
        with open(log, "rb") as f:
            data = f.read(OUTPUT_SHOWN + 1)
    except OSError:
        return ""
    text = data[:OUTPUT_SHOWN].decode("utf-8", "replace")
    return text + ("\n... (output truncated)" if len(data) > OUTPUT_SHOWN else "")


def grade_file(spec: ProblemSpec, path: Path | str, *, seed: int | None = None, limits: Limits | None = None,
               only: list[str] | None = None) -> Report:
    """Grade one file (forks a zygote for the occasion)."""
    with Grader(limits) as g:
        return g.grade(spec, path, seed=seed, only=only)



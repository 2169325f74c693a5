"""The trusted side of a check: the Grader drives sandboxed workers over prepared cases.

Every verdict is computed in this process (``verdict.py``), from tensors the worker sent
back as raw bytes and from expected values (``problem.py``) the worker never saw.
"""

from __future__ import annotations

import contextlib
import hashlib
import secrets
import sys
import tempfile
import time
from pathlib import Path

import torch

from torchcode.catalog.spec import ProblemSpec
from torchcode.errors import UsageError
from torchcode.grader import execute, protocol
from torchcode.grader.limits import Limits
from torchcode.grader.problem import Problem
from torchcode.grader.result import CaseResult, Report, Verdict, overall
from torchcode.grader.sandbox import WorkerProcess, Zygote
from torchcode.grader.verdict import clean_error, error_result, malformed, number

__all__ = ["Grader", "Limits", "Problem", "grade_file", "resolve_device", "default_dtypes", "protected_paths"]

OUTPUT_SHOWN = 4000
LOAD_REPLY = protocol.Budget(header=1 << 20)  # an import's reply carries no tensors


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
        return self.zygote.spawn({"tmp": str(tmp), "log": str(tmp / "output.txt"), "cwd": str(tmp / "cwd"),
                                  "memory_mb": lim.memory_mb,
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
                notes = protocol.Notes()
                try:
                    reply, _ = worker.receive(self.limits.load_limit, LOAD_REPLY, notes)
                    error = clean_error(reply["error"]) if "error" in reply else None
                except (protocol.Timeout, protocol.PeerClosed, protocol.ProtocolError) as e:
                    raise UsageError(f"{path} could not be loaded: {type(e).__name__} {e}") from None
                if error or notes.forbidden or notes.tamper:
                    raise UsageError(f"{path} could not be loaded: {error['message'] if error else 'forbidden call'}")
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
        notes = protocol.Notes()

        def not_run(verdict: Verdict, message: str, traceback: str = "") -> None:
            report.verdict, report.message, report.traceback = verdict, message, traceback
            report.cases = [CaseResult(d.name, Verdict.NOT_RUN, targets=d.targets) for d, _ in defs]

        load_limit = min(lim.load_limit, lim.total_limit)
        try:
            reply, _ = worker.receive(load_limit, LOAD_REPLY, notes)
        except protocol.Timeout:
            return not_run(Verdict.TIME_LIMIT, f"importing your file took longer than {load_limit:g} s: is there "
                                               "a loop or a long computation at the top level?")
        except protocol.PeerClosed:
            return not_run(Verdict.CRASHED, "your code's process {exit} while your file was being imported "
                                            "(sys.exit, os._exit or a crash at the top level?)")
        except protocol.ProtocolError as e:
            return not_run(Verdict.CRASHED, malformed(e))
        finally:
            if notes.ready is not None:
                report.limits["confined"] = _confined(notes.ready.get("confined"))
        if notes.forbidden or notes.tamper or "error" in reply:
            r = judge_import(reply, notes)
            return not_run(r.verdict, r.message, r.traceback)
        try:
            report.load_seconds = float(number(reply.get("seconds", 0.0), "time"))
        except protocol.ProtocolError as e:
            return not_run(Verdict.CRASHED, malformed(e))
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
            budget = _reply_budget(prep)
            notes = protocol.Notes()
            try:
                worker.send(prep.message, prep.header)
                reply, tensors = worker.receive(limit, budget, notes)
            except protocol.Timeout:
                worker.kill()
                which = (f"{per_case:g} s, the time limit per case" if limit == per_case
                         else f"{lim.total_limit:g} s, the time limit for the whole check")
                report.cases.append(CaseResult(d.name, Verdict.TIME_LIMIT, targets=prep.case.targets, seconds=limit,
                                               message=f"still running after {which}: look for an endless loop, "
                                                       "or a Python loop over every element"))
                dead = "an earlier case hit the time limit"
                continue
            except protocol.ProtocolError as e:
                worker.kill()  # the stream is out of step: nothing more it says can be trusted
                report.cases.append(CaseResult(d.name, Verdict.CRASHED, targets=prep.case.targets,
                                               seconds=time.perf_counter() - t, message=malformed(e)))
                dead = "an earlier case sent back a malformed result"
                continue
            except (protocol.PeerClosed, BrokenPipeError, ConnectionResetError):
                report.cases.append(CaseResult(d.name, Verdict.CRASHED, targets=prep.case.targets,
                                               seconds=time.perf_counter() - t,
                                               message="your code's process {exit} during this case without returning "
                                                       "a result (os._exit, a segfault, or running "
                                                       f"out of memory; the limit is {lim.memory_mb} MB)"))
                dead = "an earlier case crashed the process"
                continue
            result = problem.judge(prep, reply, tensors, notes)
            report.cases.append(result)
            if result.verdict is Verdict.CRASHED:  # a malformed reply: the stream may be out of step
                worker.kill()
                dead = "an earlier case sent back a malformed result"
        report.verdict = overall(report.cases)
        first_bad = next((c for c in report.cases if c.verdict is report.verdict), None)
        report.message = first_bad.message if first_bad and not report.passed else ""


def judge_import(reply: dict, notes: protocol.Notes) -> CaseResult:
    """The verdict of an import that reported an error or a forbidden call."""
    res = CaseResult("import", Verdict.RUNTIME_ERROR)
    if notes.forbidden or notes.tamper:
        tamper = (f"your code tampered with the grader's guards ({notes.tamper[0]}); submissions may not switch them off"
                  if notes.tamper else "")
        return error_result(res, {"kind": "forbidden", "names": notes.forbidden, "message": tamper})
    try:
        return error_result(res, clean_error(reply["error"]))
    except protocol.ProtocolError as e:
        res.verdict, res.message = Verdict.CRASHED, malformed(e)
        return res


def _confined(info) -> dict:
    """What confinement the worker reported before any learner code ran."""
    if not isinstance(info, dict):
        return {}
    return {str(k)[:40]: (v if type(v) in (bool, int) else False) for k, v in list(info.items())[:16]}


def _reply_budget(prep) -> protocol.Budget:
    """What a reply to this case may hold: a generous multiple of the expected outputs and gradients
    (the worker itself refuses anything larger with a wrong-output verdict, see ``max_reply``)."""
    gold = prep.gold
    found = [t for o in gold.outputs for t in execute.flatten(o).values() if isinstance(t, torch.Tensor)]
    found += [g for g in (*gold.input_grads.values(), *gold.param_grads.values()) if isinstance(g, torch.Tensor)]
    tensors = 2 * len(found) + 16
    nbytes = 32 * sum(t.numel() for t in found) + (1 << 20)
    prep.header["max_reply"] = {"tensors": tensors, "bytes": nbytes}
    return protocol.Budget(header=1 << 20, tensors=tensors, nbytes=nbytes + protocol.ALIGN * tensors)


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

    packs = {spec.pack, paths.builtin_pack(), *(p.expanduser() for p in paths.extra_packs())}
    dirs = [paths.PACKAGE_DIR, paths.home()]
    dirs += [Path(p) / "torchcode" for p in sys.path if p and (Path(p) / "torchcode").is_dir()]  # other copies
    # (an editable install also leaves the course in site-packages/torchcode/_builtin)
    dirs += [pack / sub for pack in packs for sub in ("problems", "solutions", "templates")]
    return sorted({str(Path(d).resolve()) for d in dirs})  # absolute and real: the worker runs elsewhere


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

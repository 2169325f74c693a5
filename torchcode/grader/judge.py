"""The trusted side of a check: the Grader drives sandboxed workers over prepared cases.

Every verdict is computed in this process (``verdict.py``), from tensors the worker sent
back as raw bytes and from expected values (``problem.py``) the worker never saw.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import random
import secrets
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

from torchcode.catalog.spec import ProblemSpec
from torchcode.errors import GraderError, SpecError, UsageError
from torchcode.grader import cases as caseapi
from torchcode.grader import defaults, execute, portable, protocol
from torchcode.grader.limits import Limits
from torchcode.grader.problem import Problem
from torchcode.grader.result import FAILS_WITH_NEW_VALUES, CaseResult, Report, Verdict, overall
from torchcode.grader.sandbox import WorkerProcess, Zygote
from torchcode.grader.tree import SCRATCH, remove_tree
from torchcode.grader.verdict import clean_error, error_result, malformed, number, unfinished_forms

__all__ = ["Grader", "Limits", "Problem", "grade_file", "resolve_device", "default_dtypes", "protected_paths"]

OUTPUT_SHOWN = 4000
SDPA = "torch.nn.functional.scaled_dot_product_attention"  # where a problem allows it, the worker warms it up
LOAD_REPLY = protocol.Budget(header=1 << 20)  # an import's reply carries no tensors
DRY_RUN_SECONDS = 1.5  # at most this long for the GPU-portability dry runs of code accepted on the CPU


def _identity(path: Path, protected: list[str] = ()) -> tuple[int, int, int] | None:
    """What a worker started for ``path`` depends on: the file (Landlock's rule holds its inode) and, where its
    folder holds a protected tree, the folder's entries (each readable by inode: a helper module an editor
    saved by renaming a new file over it is another inode; that changes the folder's mtime)."""
    try:
        st = path.stat()
        folder = path.parent.stat() if any(q.startswith(str(path.parent) + "/") for q in protected) else None
    except OSError:
        return None
    return st.st_dev, st.st_ino, folder.st_mtime_ns if folder is not None else 0


# -- the public entry points ------------------------------------------------------------------------------
class Grader:
    """Grades submissions; holds the zygote, so N submissions cost one torch import.

    Create it before this process runs any tensor op or asks torch.cuda anything (the zygote is forked from here;
    a later one is a fresh interpreter: see sandbox._forkable).
    """

    def __init__(self, limits: Limits | None = None):
        self.limits = limits or Limits()
        try:
            self.zygote = Zygote()
        except OSError as e:
            raise GraderError(f"cannot start the process that starts workers ({e})") from None
        self._problems: dict[str, Problem] = {}
        self._ahead: _Ahead | None = None  # the next grade's cases, built between grades
        self._spare: tuple | None = None  # (key, worker, its folder): the next grade's worker, started

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        self.drop_ahead()
        self.zygote.close()

    # -- a warm session's head start (see torchcode.session) ----------------------------------------------
    def prepare_ahead(self, spec: ProblemSpec, dtypes: list[str] | None = None, seed: int | None = None) -> None:
        """Draw the next grade's seed now and build its cases (the reference's results) in a background
        thread, while nobody waits; a ``grade`` of the same problem and dtypes with no seed given uses them.
        The seed stays hidden all the same: drawn at random, in this process. With ``seed`` (a class graded
        on one seed), the cases of that seed, for a ``grade`` that gives the same seed."""
        self.drop_ahead(workers=False)
        problem = self.problem(spec)
        dts = list(dtypes or default_dtypes(spec, self.limits.device))
        defs = [(d, dt) for dt in dts for d in problem.cases if d.runs_in(dt)]
        ahead = _Ahead((str(spec.folder), tuple(dts)), secrets.randbelow(2**31) if seed is None else int(seed))
        ahead.given = seed is not None

        def work():
            for replay in (False, True):
                for k in run_order(defs, ahead.seed):
                    if ahead.stop:
                        return
                    d, dt = defs[k]
                    try:
                        prep = problem.prepare(d, ahead.seed, dt, self.limits.device, replay=replay)
                    except Exception:  # noqa: BLE001 - the grade meets it again, and reports it
                        return
                    with ahead.lock:
                        ahead.preps.setdefault((d.name, dt, replay), prep)

        ahead.thread = threading.Thread(target=work, name="torchcode-ahead", daemon=True)
        ahead.thread.start()
        self._ahead = ahead

    def spawn_ahead(self, spec: ProblemSpec, path: Path | str, dtypes: list[str] | None = None) -> None:
        """Start the next grade's worker now, for the same file, problem and dtypes: it waits, started and
        confined, for the file to be loaded. It has run nothing of the learner's: a fresh worker still."""
        self.drop_ahead(cases=False)
        path = Path(path).resolve()
        dts = list(dtypes or default_dtypes(spec, self.limits.device))
        identity = _identity(path, self._protected(spec))
        if identity is None:
            return
        tmp = Path(tempfile.mkdtemp(prefix=SCRATCH))
        try:
            worker = self._spawn(spec, path, tmp, dts)
        except GraderError:
            remove_tree(tmp)
            return
        self._spare = ((str(spec.folder), str(path), tuple(dts), identity, tuple(self.limits.imports_from)), worker, tmp)

    def drop_ahead(self, cases: bool = True, workers: bool = True) -> None:
        if cases and self._ahead is not None:
            self._ahead.stop = True
            self._ahead.thread.join()
            self._ahead = None
        if workers and self._spare is not None:
            _, worker, tmp = self._spare
            self._spare = None
            worker.kill()
            worker.finish()
            remove_tree(tmp)

    def _take_ahead(self, spec: ProblemSpec, dtypes: list[str]) -> "_Ahead | None":
        ahead, self._ahead = self._ahead, None
        if ahead is not None and ahead.key != (str(spec.folder), tuple(dtypes)):
            ahead.stop = True
            ahead.thread.join()
            return None
        return ahead

    def _take_spare(self, spec: ProblemSpec, path: Path, dtypes: list[str]):
        spare = self._spare
        # the same file: the same path *and* inode. Where the file's folder holds a protected path (the progress
        # store in the home folder), Landlock lets the worker read the file alone, by inode: an editor that saves
        # by renaming a new file over the old one (and the browser workspace) leaves a worker that cannot read it
        if spare is None or spare[0] != (str(spec.folder), str(path), tuple(dtypes), _identity(path, self._protected(spec)),
                                         tuple(self.limits.imports_from)):  # a notebook's folder, changed by %cd
            self.drop_ahead(cases=False)
            return None
        self._spare = None
        return spare[1], spare[2]

    def _protected(self, spec: ProblemSpec) -> list[str]:
        return protected_paths(spec) + [str(Path(p).resolve()) for p in self.limits.protect]

    def problem(self, spec: ProblemSpec) -> Problem:
        key = str(spec.folder)
        if key not in self._problems:
            self._problems[key] = Problem(spec)
        return self._problems[key]

    def _spawn(self, spec: ProblemSpec, path: Path, tmp: Path, dtypes: list[str], confine: bool = True) -> WorkerProcess:
        """A fresh worker whose output goes to tmp/output.txt and whose scratch directory (its working directory) is a folder in tmp.

        It initialises the device (and loads the kernels for ``dtypes``) before it confines itself;
        ``_started`` reads whether that worked.
        """
        lim = self.limits
        cwd = Path(tempfile.mkdtemp(prefix=SCRATCH, dir=tmp))
        config = {"tmp": str(tmp), "log": str(tmp / "output.txt"), "cwd": str(cwd), "memory_mb": lim.memory_mb,
                  "address_limit": bounds_address_space(lim.device), "device": lim.device, "output_bytes": lim.output_bytes, "threads": lim.threads,
                  "path": str(path), "confine": lim.confine and confine, "protected": self._protected(spec),
                  "dtypes": list(dtypes), "sdpa": SDPA not in spec.forbidden, "imports_from": list(lim.imports_from), "device_init": lim.device_init}
        try:
            worker = self.zygote.spawn(config)
        except OSError as e:
            raise GraderError(f"cannot start a worker process ({e})") from None
        worker.watch_scratch(cwd, lim.memory_mb << 20, mapped=not bounds_address_space(lim.device))
        return worker

    def _started(self, worker: WorkerProcess) -> dict:
        """Read the worker's first message, sent before any learner code ran: what confinement is in force.
        A worker that did not start is a GraderError, never a verdict."""
        notes = protocol.Notes()
        try:
            reply, _ = worker.receive_first(self.limits.load_limit, LOAD_REPLY, notes)
        except protocol.Timeout:
            raise GraderError(f"the worker process did not get ready within {self.limits.load_limit:g} s "
                              f"(initialising the {self.limits.device} device)") from None
        except (protocol.PeerClosed, protocol.ProtocolError, OSError):
            worker.kill()
            info = worker.finish()
            raise GraderError(f"the worker process {info.describe()} before your file was loaded") from None
        if notes.ready is None:
            cpu = " (`--device cpu` grades on the CPU instead)" if self.limits.device == "cuda" else ""
            raise GraderError(str(reply.get("message") or "the worker process did not start")[:2000] + cpu)
        confined = _confined(notes.ready.get("confined"))
        if self.limits.memory_mb and not bounds_address_space(self.limits.device):
            confined["memory"] = worker.watch_memory(self.limits.memory_mb << 20)  # from here on: no learner code yet
        return confined

    def _send_load(self, worker: WorkerProcess, spec: ProblemSpec, path: Path, forbidden: bool = True) -> None:
        e, calling = spec.entry, self.problem(spec).calling
        worker.send(protocol.Message(), {"op": "load", "path": str(path), "forbidden": list(spec.forbidden) if forbidden else [],
                                         "entry": {"kind": e.kind, "name": e.name, "params": list(e.params),
                                                   "init": list(e.init), "positional": calling.positional,
                                                   "init_positional": calling.init_positional}})

    @contextlib.contextmanager
    def loaded_worker(self, spec: ProblemSpec, path: Path, dtype: str = "float32", before_load=None,
                      reference: bool = False):
        """A worker with the learner's file imported (for bench; the file has already been graded).
        ``before_load(worker)`` runs once the worker is ready, while no learner code is in it yet.
        ``reference``: a worker with the problem's reference loaded instead (trusted code: not confined,
        no kernel forbidden), for bench to time it exactly as it times the learner's."""
        if reference:
            path = spec.solution_path
        fail = GraderError if reference else UsageError
        with _scratch_folder() as tmp:
            worker = self._spawn(spec, path, tmp, [dtype], confine=not reference)
            try:
                self._started(worker)
                if before_load is not None:
                    before_load(worker)
                self._send_load(worker, spec, path, forbidden=not reference)
                notes = protocol.Notes()
                try:
                    reply, _ = worker.receive(self.limits.load_limit, LOAD_REPLY, notes)
                    error = clean_error(reply["error"]) if "error" in reply else None
                except (protocol.Timeout, protocol.PeerClosed, protocol.ProtocolError) as e:
                    raise fail(f"{path} could not be loaded: {type(e).__name__} {e}") from None
                if error or notes.forbidden or notes.tamper:
                    raise fail(f"{path} could not be loaded: {error['message'] if error else 'forbidden call'}")
                yield worker
            finally:
                worker.kill()
                worker.finish()

    def grade(self, spec: ProblemSpec, path: Path | str, *, seed: int | None = None,
              only: list[str] | None = None, dtypes: list[str] | None = None, on_event=None,
              gpu_dry_run: bool = False) -> Report:
        """Grade one file. ``on_event(dict)``, if given, hears the progress: ``started`` (the cases, in
        the order they are reported), then ``case`` before and ``case_done`` after each run of a case
        (``replay``: the run with new values of the same shapes).

        ``gpu_dry_run``: code accepted on the CPU runs its cases once more on the meta device; what would
        fail on a GPU goes into ``report.advice`` (torchcode.grader.portable). The first costs seconds."""
        path = Path(path).resolve()
        if not path.is_file():
            raise UsageError(f"no such file: {path}")
        source = path.read_bytes()
        t0 = time.perf_counter()
        lim = self.limits
        dtypes = list(dtypes or default_dtypes(spec, lim.device))
        ahead = self._take_ahead(spec, dtypes)
        if ahead is not None and (only or (seed is None if ahead.given else seed is not None)
                                  or ahead.given and int(seed) != ahead.seed):  # this grade's seed or cases are its own
            ahead.stop = True
            ahead = None
        seed = ahead.seed if ahead else secrets.randbelow(2**31) if seed is None else int(seed)
        per_case = lim.time_limit or spec.grading.time_limit
        report = Report(problem=spec.id, file=str(path), verdict=Verdict.ACCEPTED, seed=seed,
                        sha256=hashlib.sha256(source).hexdigest(),
                        limits={"time_per_case_s": per_case, "total_s": lim.total_limit, "load_s": lim.load_limit,
                                "memory_mb": lim.memory_mb, "output_bytes": lim.output_bytes, "processes": 0},
                        device=lim.device, dtypes=dtypes)
        dry = gpu_dry_run and lim.device == "cpu"
        if dry:
            self.zygote.warm_meta()
        spare = self._take_spare(spec, path, dtypes)
        worker, tmp = spare if spare else (None, Path(tempfile.mkdtemp(prefix=SCRATCH)))
        try:
            worker = worker or self._spawn(spec, path, tmp, dtypes)
            with threads(lim.threads):
                self._run(worker, spec, path, seed, per_case, report, only, dtypes, on_event or (lambda event: None),
                          ahead, dry)
        finally:
            if ahead is not None:
                ahead.stop = True
            if worker is not None:
                worker.kill()
                info = worker.finish()
            report.output = _read_output(tmp / "output.txt")
            remove_tree(tmp)
        if (info is not None and info.exit_code == 1 and info.signal is None  # OpenMP's exit(EXIT_FAILURE)
                and report.output.rstrip().rpartition("\n")[2].startswith("libgomp: Thread creation failed")):
            # OpenMP's own last line as it exits: not a memory or segfault crash (a submission that prints the line
            # and aborts, or is killed, keeps the plain crash message)
            for obj in [report, *report.cases]:
                if "{exit}" in obj.message:
                    when = ("while your file was being imported" if "while your file was being imported" in obj.message
                            else "during this case")
                    obj.message = (f"your code's process {{exit}} {when} when it asked for more threads than the "
                                   f"{lim.threads} it runs on (the judge starts them before your code runs and "
                                   "refuses new ones): leave torch.set_num_threads and OpenMP settings out")
        fill = {"{exit}": info.describe(), "{memory_mb}": str(lim.memory_mb), "{hint}": f"`torchcode hint {spec.id}`"}
        for obj in [report, *report.cases]:
            for key, value in fill.items():
                obj.message = obj.message.replace(key, value)
        report.seconds = time.perf_counter() - t0
        return report

    def _run(self, worker: WorkerProcess, spec, path, seed, per_case, report: Report, only, dtypes, tell,
             ahead: "_Ahead | None" = None, dry: bool = False) -> None:
        lim = self.limits
        problem = self.problem(spec)

        def prepare(d, seed, dtype, device, replay=False):  # built ahead of the grade, or now
            return ahead.take(problem, d, dtype, device, replay) if ahead else problem.prepare(d, seed, dtype, device,
                                                                                                replay)
        defs = [(d, dt) for dt in dtypes for d in problem.cases  # as reported
                if (not only or d.name in only) and d.runs_in(dt)]
        order = run_order(defs, seed)
        tell({"event": "started", "cases": [d.name for d, _ in defs], "dtypes": list(dtypes), "seed": seed})
        # overlaps the worker's start
        first = prepare(defs[order[0]][0], seed, defs[order[0]][1], lim.device) if defs else None

        def not_run(verdict: Verdict, message: str, traceback: str = "") -> None:
            report.verdict, report.message, report.traceback = verdict, message, traceback
            report.cases = [CaseResult(d.name, Verdict.NOT_RUN, targets=d.targets) for d, _ in defs]

        # ready, and the memory watch's baseline read, before the file is sent: sent earlier, its import ran while
        # the first case was built, and what it allocated meanwhile became the baseline
        report.limits["confined"] = self._started(worker)
        self._send_load(worker, spec, path)
        notes = protocol.Notes()
        load_limit = min(lim.load_limit, lim.total_limit)
        try:
            reply, _ = worker.receive(load_limit, LOAD_REPLY, notes)
        except protocol.Timeout:
            if not notes.set_up:  # none of the learner's code ran yet: never a verdict on it
                raise GraderError(f"the worker process did not finish setting up for your file within {load_limit:g} "
                                  "s, before any of it ran (is the machine very busy?)") from None
            return not_run(Verdict.TIME_LIMIT, f"importing your file took longer than {load_limit:g} s: is there "
                                               "a loop or a long computation at the top level?")
        except protocol.PeerClosed:
            if not notes.set_up:
                raise GraderError("the worker process ended while it set up for your file, before any of it ran") \
                    from None
            if worker.scratch_over or worker.memory_over:
                return not_run(Verdict.MEMORY_LIMIT, _over_message(worker, "while your file was being imported"))
            return not_run(Verdict.CRASHED, "your code's process {exit} while your file was being imported "
                                            "(sys.exit, os._exit or a crash at the top level?)")
        except protocol.ProtocolError as e:
            return not_run(Verdict.CRASHED, malformed(e))
        if notes.forbidden or notes.tamper or "error" in reply:
            r = judge_import(reply, notes)
            return not_run(r.verdict, r.message, r.traceback)
        try:
            report.load_seconds = float(number(reply.get("seconds", 0.0), "time"))
        except protocol.ProtocolError as e:
            return not_run(Verdict.CRASHED, malformed(e))
        try:
            wrong_default = defaults.problem(path.read_bytes(), spec.entry, problem.reference)
        except OSError:
            wrong_default = None
        wrong_default = wrong_default or defaults.reported_problem(reply.get("defaults"), spec.entry,
                                                                   problem.reference)
        if wrong_default:
            return not_run(Verdict.BAD_INTERFACE, wrong_default)
        clock = [0.0]  # seconds the worker spent on cases: the whole-check limit charges nothing else
        results: dict[int, CaseResult] = {}
        preps: dict = {}
        dead, following = None, None
        pool = ThreadPoolExecutor(max_workers=1)  # prepares the next case while the worker runs this one
        try:
            for n, k in enumerate(order):  # a seeded order: what one case leaves behind meets different cases
                d, dtype = defs[k]
                if dead:
                    results[k] = CaseResult(d.name, Verdict.NOT_RUN, targets=d.targets, message=f"not run: {dead}")
                    continue
                preps[k] = prep = first if n == 0 else following.result()
                if n + 1 < len(order):
                    following = pool.submit(prepare, defs[order[n + 1]][0], seed, defs[order[n + 1]][1], lim.device)
                tell({"event": "case", "name": d.name, "dtype": dtype, "index": n, "total": len(order), "replay": False})
                results[k], dead = self._exchange(worker, problem, prep, per_case, clock, functools.partial(
                    problem.prepare, d, caseapi.case_seed(seed, "again"), dtype, lim.device))
                tell(_done(results[k], dtype, False))
            # each passing case again, with new values of the same shapes, in the same process: a replay that fails
            # names state kept between calls (a cache by shape), which a wrong answer elsewhere may come from too.
            # After a failure of another kind (an error, a forbidden call) that verdict outranks what a replay finds:
            # the report comes sooner without them
            answers = (Verdict.WRONG_ANSWER, Verdict.WRONG_OUTPUT, Verdict.NOT_IMPLEMENTED)
            replays = ([k for k in order if results[k].passed]
                       if not dead and all(r.passed or r.verdict in answers for r in results.values()) else [])

            def replay(k: int):
                return prepare(defs[k][0], seed, defs[k][1], lim.device, replay=True)

            following = pool.submit(replay, replays[0]) if replays else None
            for n, k in enumerate(replays):
                prep = following.result()
                if n + 1 < len(replays):
                    following = pool.submit(replay, replays[n + 1])
                if prep is None:  # its shapes depend on the values drawn
                    continue
                tell({"event": "case", "name": defs[k][0].name, "dtype": defs[k][1], "index": n,
                      "total": len(replays), "replay": True})
                res, dead = self._exchange(worker, problem, prep, per_case, clock, None)
                tell(_done(res, defs[k][1], True))
                if not res.passed:
                    results[k] = self._replay_failed(spec, path, problem, prep, res, per_case, dtypes)
                if dead or not res.passed:
                    break
        finally:
            pool.shutdown(cancel_futures=True)
        report.cases = [results[k] for k in range(len(defs))]
        self._left_by_other_cases(spec, path, problem, report, order, preps, per_case, dtypes)
        _say_precision(report.cases, defs, self._in_float32(worker, problem, report.cases, defs, seed, per_case, clock,
                                                            dead))
        unfinished_forms(report.cases)
        report.verdict = overall(report.cases)
        explained = report.explained
        report.message = explained.message if explained and not report.passed else ""
        if dry and report.passed and not dead:
            # a GPU also grades the problem's low-precision dtypes: the dry run tries the first one not graded here
            untried = [d for d in spec.grading.dtypes if d not in dtypes and d != "float32"]
            report.advice = self._dry_run(worker, path, [preps[k] for k in order if k in preps],
                                          untried[0] if untried else None)

    def _in_float32(self, worker: WorkerProcess, problem: Problem, cases: list[CaseResult], defs, seed: int,
                    per_case: float, clock: list, dead) -> dict[str, bool]:
        """A wrong answer in a case that runs in low precision only is not evidence of a precision problem by
        itself: the same case, run once more in float32 on the same worker, tells one (float32 passes) from a plain
        error (float32 fails too). Whether float32 passed, by case name; nothing for a worker that is gone."""
        found: dict[str, bool] = {}
        for (d, dtype), c in zip(defs, cases):
            if dead or c.verdict is not Verdict.WRONG_ANSWER or d.runs_in("float32") or d.name in found:
                continue
            try:
                prep = problem.prepare(d, seed, "float32", self.limits.device)
            except SpecError:  # the reference itself cannot run it in float32: no evidence either way
                continue
            res, dead = self._exchange(worker, problem, prep, per_case, clock, None)
            if res.verdict in (Verdict.ACCEPTED, Verdict.WRONG_ANSWER):
                found[d.name] = res.passed
        return found

    def _dry_run(self, worker: WorkerProcess, path: Path, preps: list, low: str | None = None) -> list[str]:
        """Code accepted on the CPU, run once more on the meta device: would it also run on a GPU?
        (torchcode.grader.portable); and, with ``low`` (a dtype a GPU grades that this check did not), the
        smallest case once more there in that dtype: does what it returns keep the inputs' dtype? Each has its own
        time (``DRY_RUN_SECONDS``). Advice only: it never changes the verdict."""
        try:
            source = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return []
        # small cases first: a dry run's cost is in the number of operations (Python meta kernels), which long
        # sequences in blocks multiply
        cases = [p for p in sorted(preps, key=lambda p: p.message.nbytes) if p.header.get("dtype") == "float32"]

        def ask(prep, deadline: float, as_dtype: str | None = None) -> str | None:
            """The advice for one case ("": none), or None when the worker is gone (it took too long)."""
            extra = {"as_dtype": as_dtype} if as_dtype else {}
            try:
                worker.send(prep.message, dict(prep.header, op="portable", **extra))
                reply, _ = worker.receive(max(0.0, deadline - time.monotonic()), LOAD_REPLY, protocol.Notes())
            except (protocol.Timeout, protocol.ProtocolError, protocol.PeerClosed, OSError):
                worker.kill()
                return None
            return portable.advice(reply, source, prep.params[0] if prep.params else "x", as_dtype)

        said: list[str] = []
        if low is not None and cases:
            dtype_said = ask(cases[0], time.monotonic() + DRY_RUN_SECONDS, low)
            if dtype_said is None:
                return []
            said.append(dtype_said)
        deadline, seen = time.monotonic() + DRY_RUN_SECONDS, set()
        for prep in cases:
            if time.monotonic() >= deadline:
                break
            if prep.case.name in seen:
                continue
            seen.add(prep.case.name)
            device_said = ask(prep, deadline)
            if device_said is None:
                break
            if device_said:
                said.insert(0, device_said)  # the worse news first: it would not run at all
                break
        return [s for s in said if s]

    def _exchange(self, worker: WorkerProcess, problem: Problem, prep, per_case: float, clock: list, again):
        """Run one prepared case on the worker: its result, and why the worker is gone (or None).

        With ``again`` (a case's first run), the run may take twice the limit: one-time loading (a lazy
        import, CUDA kernels) is not the case's. One that needed more than the limit is judged (its answer and notes
        count; only its time is forgiven), then runs again on new
        inputs (``again()`` prepares them), within it. ``clock[0]`` adds up the worker's time."""
        lim, c = self.limits, prep.case
        limit_said, of = "the time limit per case", ""
        if c.time_factor != 1:  # a long case's own allowance (cases.Case)
            limit_said, of = "this long case's time limit", f", {c.time_factor:g} x the {per_case:g} s per case"
            per_case *= c.time_factor
        left = max(lim.total_limit - clock[0], 0.0)
        budget = min(2 * per_case if again else per_case, left)
        why = ((f"{budget:g} s ({limit_said} is {per_case:g} s{of}; a case's first run may take twice that)"
                if again else f"{per_case:g} s, {limit_said}{of}")
               if budget < left else f"{lim.total_limit:g} s, the time limit for the whole check")
        t = time.perf_counter()
        notes = protocol.Notes()
        try:
            reply, tensors = self._send_case(worker, prep, budget, notes)
            took = time.perf_counter() - t
            if again and took > per_case:
                clock[0] += took
                # the slow first run's answer counts too (and what the guards noted in it): only its time is
                # forgiven, so a first call that is slow and wrong, or slow and forbidden, fails here
                first = None if worker.over_now() else problem.judge(prep, reply, tensors, notes)
                if first is not None and not first.passed:
                    if first.verdict is Verdict.CRASHED:
                        worker.kill()
                        return first, "an earlier case sent back a malformed result"
                    return first, None
                prep = again()
                left = max(lim.total_limit - clock[0], 0.0)
                budget = min(per_case, left)
                why = (f"{per_case:g} s, {limit_said}{of}, when run again on new inputs (its first run "
                       f"took {took:.1f} s)" if budget < left else
                       f"{lim.total_limit:g} s, the time limit for the whole check")
                t = time.perf_counter()
                notes = protocol.Notes()
                reply, tensors = self._send_case(worker, prep, budget, notes)
            clock[0] += time.perf_counter() - t
        except protocol.Timeout:
            worker.kill()
            return (CaseResult(c.name, Verdict.TIME_LIMIT, targets=c.targets, seconds=budget,
                               message=f"still running after {why}: look for an endless loop, "
                                       "or a Python loop over every element" + (
                                           ", or a loop of many small torch operations (tiles of 16: under the "
                                           "grader's checks each op costs several times what it costs alone)"
                                           if c.time_factor != 1 else "")),
                    "an earlier case hit the time limit")
        except protocol.ProtocolError as e:
            worker.kill()  # the stream is out of step: nothing more it says can be trusted
            return (CaseResult(c.name, Verdict.CRASHED, targets=c.targets, seconds=time.perf_counter() - t,
                               message=malformed(e)), "an earlier case sent back a malformed result")
        except (protocol.PeerClosed, BrokenPipeError, ConnectionResetError):
            if worker.scratch_over or worker.memory_over:
                return (CaseResult(c.name, Verdict.MEMORY_LIMIT, targets=c.targets, seconds=time.perf_counter() - t,
                                   message=_over_message(worker, "during this case")),
                        "an earlier case ran out of memory" if worker.memory_over else "an earlier case wrote too many files")
            return (CaseResult(c.name, Verdict.CRASHED, targets=c.targets, seconds=time.perf_counter() - t,
                               message="your code's process {exit} during this case without returning "
                                       "a result (os._exit, a segfault, or running "
                                       f"out of memory; the limit is {lim.memory_mb} MB)"),
                    "an earlier case crashed the process")
        if worker.over_now():  # the watches poll: what the worker holds as it replies counts, last case included
            return (CaseResult(c.name, Verdict.MEMORY_LIMIT, targets=c.targets, seconds=time.perf_counter() - t,
                               message=_over_message(worker, "during this case")),
                    "an earlier case ran out of memory" if worker.memory_over else "an earlier case wrote too many files")
        result = problem.judge(prep, reply, tensors, notes)
        if result.verdict is Verdict.CRASHED:  # a malformed reply: the stream may be out of step
            worker.kill()
            return result, "an earlier case sent back a malformed result"
        return result, None

    def _alone(self, spec, path, problem: Problem, prep, per_case: float, dtypes) -> CaseResult | None:
        """The case run first in a fresh worker, where nothing another case left behind exists (None: could not)."""
        with _scratch_folder() as tmp:
            worker = self._spawn(spec, path, tmp, dtypes)
            try:
                self._started(worker)
                self._send_load(worker, spec, path)
                notes = protocol.Notes()
                reply, _ = worker.receive(self.limits.load_limit, LOAD_REPLY, notes)
                if "error" in reply or notes.forbidden or notes.tamper:
                    return None
                res, _ = self._exchange(worker, problem, prep, per_case, [0.0], lambda: prep)
                return res
            except (GraderError, protocol.Timeout, protocol.PeerClosed, protocol.ProtocolError, OSError):
                return None
            finally:
                worker.kill()
                worker.finish()

    def _replay_failed(self, spec, path, problem, prep, res: CaseResult, per_case, dtypes) -> CaseResult:
        """A case that passed failed when run again with new values: is it state kept from earlier calls?"""
        res.replay = True
        alone = self._alone(spec, path, problem, prep, per_case, dtypes) if res.verdict not in SLOW else None
        if alone is not None and alone.passed:  # proven: state from earlier calls changed the answer
            res.verdict = Verdict.WRONG_ANSWER
            res.message = (f"{HIDDEN_STATE} (This case passed; run again with new values of the same shapes in the "
                           f"same process it failed, and those values pass in a fresh process: {res.message})")
        else:
            res.message = (f"{FAILS_WITH_NEW_VALUES}{_passed_how(prep, problem.calling.positional)}this case fails: "
                           f"{res.message}")
        return res

    def _left_by_other_cases(self, spec, path, problem, report: Report, order, preps, per_case, dtypes) -> None:
        """The first case (in run order) that failed after another passed: does it pass alone, in a fresh worker?"""
        if not order or not any(c.passed for c in report.cases):
            return
        for k in order[1:]:
            c = report.cases[k]
            if c.replay or c.verdict not in ANSWER or k not in preps:
                continue
            alone = self._alone(spec, path, problem, preps[k], per_case, dtypes)
            if alone is not None and alone.passed:
                c.message = (f"{STATE_BETWEEN_CASES} (This case passes when it runs first in a fresh process; it "
                             f"failed after other cases ran in the same process: {c.message})")
            return

    @staticmethod
    def _send_case(worker: WorkerProcess, prep, seconds: float, notes: protocol.Notes):
        budget = _reply_budget(prep)
        worker.send(prep.message, prep.header)
        return worker.receive(seconds, budget, notes)


def _passed_how(prep, required: int) -> str:
    """How the replay passed the optional parameters the case gives (those after the first ``required``), which its
    first run passed the other way (problem.py: by position in about half the cases): '' if it gives none."""
    given = set()
    for s in prep.header.get("steps") or []:
        given.update(prep.params[required:len(s.get("args") or [])])
        given.update(k for k in (s.get("kwargs") or {}) if k in prep.params[required:])
    names = [n for n in prep.params if n in given]
    if required < 0 or not names:
        return ""
    how = ("by position", "by keyword") if prep.header.get("positional") else ("by keyword", "by position")
    them = ", ".join(f"`{n}`" for n in names)
    return f"and with {them} passed {how[0]} (the first run passed {'it' if len(names) == 1 else 'them'} {how[1]}), "


ANSWER = (Verdict.WRONG_ANSWER, Verdict.WRONG_OUTPUT)
SLOW = (Verdict.TIME_LIMIT, Verdict.CRASHED, Verdict.MEMORY_LIMIT)  # not worth a second worker to explain
HIDDEN_STATE = ("your code gave a different answer for the same shapes with new values: do you keep results or "
                "tables from an earlier call, keyed only by shape (a dict at module level, functools.cache, an "
                "attribute on self)? Compute from the inputs and arguments of every call.")
STATE_BETWEEN_CASES = ("your code keeps state between calls: a result, mask or table kept from an earlier case "
                       "(keyed by shape, ignoring an argument such as base or window_size?) was used again.")


class _Ahead:
    """Cases of the next grade, built before it was asked for (``Grader.prepare_ahead``)."""

    def __init__(self, key: tuple, seed: int):
        self.key, self.seed = key, seed
        self.given = False  # the seed was given by the caller (never used for a grade that asks for a hidden one)
        self.preps: dict = {}
        self.lock = threading.Lock()
        self.stop = False
        self.thread: threading.Thread | None = None

    def take(self, problem: Problem, cdef, dtype: str, device: str, replay: bool, *, _missing=object()):
        """The case built ahead (each is used once), or built now if the thread has not got to it."""
        with self.lock:
            prep = self.preps.pop((cdef.name, dtype, replay), _missing)
        return problem.prepare(cdef, self.seed, dtype, device, replay) if prep is _missing else prep


@contextlib.contextmanager
def _scratch_folder():
    """A worker's temporary directory, removed on the way out whatever its worker left there (TemporaryDirectory's
    own clean-up recurses once per level: 1100 nested folders raised RecursionError)."""
    tmp = Path(tempfile.mkdtemp(prefix=SCRATCH))
    try:
        yield tmp
    finally:
        remove_tree(tmp)


def bounds_address_space(device: str) -> bool:
    """Whether the worker's memory limit is an address-space limit (RLIMIT_AS: exact, set by the worker
    itself) or, where CUDA maps far more address space than memory, the memory it holds, watched from here."""
    return device == "cpu"


PRECISION = ("{where}: a step of yours loses {dtype}'s precision or range. Count positions and lengths in integers "
             "(bfloat16 holds whole numbers exactly only up to 256), fill masked scores with float('-inf') or "
             "torch.finfo(scores.dtype).min (not -1e4 or -1e9, nor float16's minimum in every dtype), and accumulate "
             "long sums and the softmax in float32, casting the result back with .to(x.dtype)")


NOT_PRECISION = ("This case runs in {dtype} only, but it fails in float32 too (run once more to tell): not a matter "
                 "of {dtype}'s precision; the result itself is wrong there")


def _say_precision(cases: list[CaseResult], defs, in_float32: dict[str, bool] | None = None) -> None:
    """A wrong answer only low precision shows (float32 passes the same case) says it is about precision, and what to
    do (unless the case's own targets say so already). A case that runs in low precision only has that evidence
    only from ``in_float32`` (the same case run once more in float32: passed or not); one that fails in float32 too
    says so instead: it is a plain error, whatever its targets say about the dtype."""
    in_float32 = in_float32 or {}
    passed32 = {d.name for (d, dt), c in zip(defs, cases) if dt == "float32" and c.passed}
    for (d, dtype), c in zip(defs, cases):
        if c.verdict is not Verdict.WRONG_ANSWER or dtype == "float32":
            continue
        if in_float32.get(d.name) is False:
            c.message = c.message.rstrip(". ") + ". " + NOT_PRECISION.format(dtype=dtype)
            continue
        if dtype in c.message or dtype in d.targets or (c.mismatch is not None and c.mismatch.bias is not None):
            continue  # said already: by the case, or a lean
        if d.name in passed32:
            where = f"float32 passes this case and {dtype} fails it"
        elif in_float32.get(d.name):
            where = f"this case runs in {dtype} only, and float32 passes it when run once more to tell"
        else:
            continue
        c.message = c.message.rstrip(". ") + ". " + PRECISION.format(where=where[0].upper() + where[1:], dtype=dtype)


def _over_message(worker: WorkerProcess, when: str) -> str:
    from torchcode.grader.sandbox import MAX_SCRATCH_FILES

    if worker.memory_over:
        return (f"your code's process held {worker.memory_over} more memory than at its start {when} (what earlier "
                f"calls kept counts too), past the limit of {{memory_mb}} MB "
                "(--memory-limit). Look for a tensor far larger than the inputs, or one made on the CPU.")
    return (f"your code wrote {worker.scratch_over} {when}: the files it writes (in its scratch directory, where "
            f"temporary files go) may hold at most {{memory_mb}} MB, the memory limit (--memory-limit), in at most "
            f"{MAX_SCRATCH_FILES} files. Keep results in tensors.")


def _done(res: CaseResult, dtype: str, replay: bool) -> dict:
    return {"event": "case_done", "name": res.name, "dtype": dtype, "verdict": res.verdict.value,
            "seconds": res.seconds, "replay": replay}


def run_order(defs: list, seed: int) -> list[int]:
    """Indices of ``defs`` in the order they run: float32 first, then each other dtype; shuffled by the seed."""
    rnd = random.Random(seed)
    groups: dict[str, list[int]] = {}
    for k, (_, dtype) in enumerate(defs):
        groups.setdefault(dtype, []).append(k)
    order: list[int] = []
    for dtype in sorted(groups, key=lambda dt: dt != "float32"):
        ks = groups[dtype][:]
        rnd.shuffle(ks)
        order += ks
    return order


@contextlib.contextmanager
def threads(n: int):
    """The trusted side computes with the worker's number of threads: cases are small, so more threads
    only contend (10x slower on a busy machine), and bench compares like with like."""
    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(old)


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
        raise UsageError(f"--device must be auto, cpu or cuda, not {name!r} (from --device or TORCHCODE_DEVICE)")
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

"""A local pool: N warm grading sessions, one thread each, fed from one queue.

Each session is its own process (torch imported once, a zygote forked once), so a submission
costs only its own cases. ``results()`` yields in the calling thread as grades finish; the
caller writes the gradebook there. ``close()`` (also on Ctrl-C) cancels the grades in flight
and ends every session process.
"""

from __future__ import annotations

import queue
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from torchcode.classroom.discover import Submission
from torchcode.errors import GraderError, UsageError

_DONE = object()


@dataclass
class Outcome:
    """What came back for one submission: a report (as ``Report.to_dict()``), or why there is none."""

    submission: Submission
    report: dict | None = None
    error: str = ""


class LocalPool:
    backend = "local"

    def __init__(self, workers: int, problems_dirs: list[Path] | None, limits, device: str,
                 problems: list[str] = ()):
        self.workers = max(1, workers)
        self._args = dict(problems_dirs=problems_dirs, limits=limits, device=device)
        self._problems = list(problems)
        self.sessions: list = []
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()
        self.device = "cpu"

    @property
    def started(self) -> bool:
        return bool(self.sessions)

    def start(self) -> None:
        """Start the sessions (in parallel: each imports torch in its own process)."""
        from torchcode.session import Session

        self.sessions = [Session(**self._args) for _ in range(self.workers)]
        errors: list[BaseException] = []

        def up(s):
            try:
                s.start()
                if self._problems:
                    s.warm(self._problems)
            except BaseException as e:  # reported below, in the calling thread
                errors.append(e)

        threads = [threading.Thread(target=up, args=(s,), daemon=True) for s in self.sessions]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            self.close()
            raise errors[0]
        self.device = self.sessions[0].device

    def results(self, jobs: list[Submission], seed: int, dtypes: dict, gpu_dry_run: bool = False) -> Iterator[Outcome]:
        """Grade ``jobs`` (``dtypes``: problem -> the dtypes to grade it in, None for the device's default;
        ``gpu_dry_run``: as ``check --gpu-dry-run``, its advice in the report)."""
        todo: queue.Queue = queue.Queue()
        for job in by_problem(jobs):
            todo.put(job)
        done: queue.Queue = queue.Queue()
        self._threads = [threading.Thread(target=self._work, args=(s, todo, done, seed, dtypes, gpu_dry_run),
                                          daemon=True)
                         for s in self.sessions]
        for t in self._threads:
            t.start()
        left, alive = len(jobs), len(self._threads)
        while left and alive:
            item = done.get()
            if item is _DONE:
                alive -= 1
                continue
            left -= 1
            yield item

    def _work(self, session, todo: queue.Queue, done: queue.Queue, seed: int, dtypes, gpu_dry_run: bool) -> None:
        try:
            while not self._stop.is_set():
                try:
                    job = todo.get_nowait()
                except queue.Empty:
                    return
                done.put(grade_one(session, job, seed, dtypes, self._stop, gpu_dry_run=gpu_dry_run))
        finally:
            done.put(_DONE)

    def bench(self, job: Submission) -> Outcome:
        """Time one accepted kernel, alone: one session, the others stopped (their head start for a next
        grade would share the machine with the timing)."""
        for s in self.sessions[1:]:
            s.close()
        return bench_one(self.sessions[0], job)

    def close(self) -> None:
        self._stop.set()
        for s in self.sessions:
            try:
                s.cancel()
            except Exception:
                pass
        for t in self._threads:
            t.join(timeout=30)
        for s in self.sessions:
            s.close()
        self.sessions = []


def by_problem(jobs: list[Submission]) -> list[Submission]:
    """One problem's submissions in a row: a session builds the next grade's cases (same problem, the
    class's seed) while it waits for the next request, so they are ready when it comes."""
    return sorted(jobs, key=lambda j: (j.problem, j.student))


def grade_one(session, job: Submission, seed: int, dtypes: dict, stop: threading.Event | None = None,
              path: Path | None = None, gpu_dry_run: bool = False) -> Outcome:
    """Grade one submission; a grader failure is retried once (the session restarts itself), then
    reported as no result (never a verdict on the student's code)."""
    from torchcode.session import Cancelled

    error = ""
    for _ in range(2):
        if stop is not None and stop.is_set():
            return Outcome(job, error="stopped")
        try:
            graded = Path(path or job.path).resolve()
            report = session.grade(job.problem, path=str(graded), seed=seed, dtypes=dtypes.get(job.problem),
                                   gpu_dry_run=gpu_dry_run)
            return Outcome(job, report=relabel(report.to_dict(), graded, f"{job.problem}.py"))
        except Cancelled:
            return Outcome(job, error="stopped")
        except (GraderError, UsageError) as e:
            error = getattr(e, "cause", None) or str(e)
    return Outcome(job, error=error)


TEXT_FIELDS = {"file", "message", "traceback", "output", "advice", "detail"}  # where a report may name a path


def relabel(report: dict, path: Path, shown: str) -> dict:
    """The report with the graded file's path (the instructor's folder, a temporary copy) written as
    ``shown``, the name the student knows: in messages, tracebacks and the file field alike. Only the
    text fields change (never a key, a number or a hash), and only where the whole absolute path is
    named (a class folder ``c1`` or ``8`` is never replaced inside a sha256)."""
    names = sorted({str(Path(path)), str(Path(path).resolve())}, key=len, reverse=True)
    names = [n for n in names if Path(n).is_absolute() and Path(n).parent != Path(n)]  # never "/" alone
    if not names:
        return report
    # the whole path: not the start of a longer name (/tmp/c1 in /tmp/c10/... or /tmp/c1.bak), though a sentence may
    # end right after it ("... in /tmp/c1.")
    pattern = re.compile("|".join(re.escape(n) for n in names) + r"(?![\w-])(?!\.\w)")

    def walk(value, text: bool):
        if isinstance(value, dict):
            return {k: walk(v, k in TEXT_FIELDS) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v, text) for v in value]
        if text and isinstance(value, str):
            return pattern.sub(lambda _: shown, value)
        return value

    return walk(report, False)


def bench_one(session, job: Submission, path: Path | None = None) -> Outcome:
    """``Outcome.report`` is the benchmark's summary (see ``summarize``), or ``error`` says why there is none."""
    from torchcode.session import Cancelled

    try:
        return Outcome(job, report=summarize(session.bench(job.problem, Path(path or job.path).resolve())))
    except Cancelled:
        return Outcome(job, error="stopped")
    except (GraderError, UsageError) as e:
        return Outcome(job, error=getattr(e, "cause", None) or str(e))


def summarize(bench: dict) -> dict:
    """One number to rank by: the geometric mean over sizes of (your time / the reference's)."""
    import math

    rows = [r for r in bench.get("rows", []) if r.get("learner_s") and r.get("reference_s")]
    if not rows:
        return {"error": "no size could be timed"}
    ratio = math.exp(sum(math.log(r["learner_s"] / r["reference_s"]) for r in rows) / len(rows))
    last = rows[-1]
    return {"ratio": ratio, "seconds": last["learner_s"], "size": last["size"], "reference_seconds": last["reference_s"],
            "device": bench.get("device"), "dtype": bench.get("dtype"), "rows": bench.get("rows", [])}

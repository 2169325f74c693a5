"""One class run: find the submissions, skip what the gradebook already holds, grade the rest on a
pool of warm sessions (local or Ray), commit each result as it arrives, write the outputs.

Ctrl-C keeps every result committed so far (and writes the outputs for them); the CLI then says
"interrupted" and exits 130. Rerunning the same command grades only what is left.
"""

from __future__ import annotations

import os
import secrets
import shlex
import tempfile
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from torchcode.catalog import Catalog
from torchcode.classroom import feedback as fb
from torchcode.classroom.discover import Discovery, discover, where_they_are
from torchcode.classroom.gradebook import Gradebook, Row, fingerprint, score
from torchcode.classroom.pool import relabel
from torchcode.commands import interrupts
from torchcode.commands.common import wanted_dtypes
from torchcode.errors import UsageError
from torchcode.grader.tree import SCRATCH
from torchcode.progress import SEED_MAX, SEED_MIN
from torchcode.render.terminal import inert, inert_name


@dataclass
class Options:
    submissions: Path
    out: Path
    problems: list[str] | None = None
    workers: int | None = None
    seed: int | None = None
    feedback: str = "full"
    limits: object = None  # torchcode.grader.limits.Limits
    dtypes: list[str] | None = None
    problems_dirs: list[Path] | None = None
    ray: bool = False
    ray_address: str | None = None
    bench: bool = False
    gpu_dry_run: bool = False


def run(opts: Options, cat: Catalog, con: Console) -> int:
    problems = _problems(cat, opts.problems)
    if opts.feedback not in fb.FEEDBACK_MODES:
        raise UsageError(f"--feedback must be one of {', '.join(fb.FEEDBACK_MODES)}, not {opts.feedback!r}")
    if opts.seed is not None and not SEED_MIN <= opts.seed <= SEED_MAX:
        raise UsageError(f"--seed must be a whole number from {SEED_MIN} to {SEED_MAX}, not {opts.seed}")
    if opts.workers is not None and opts.workers < 1:
        raise UsageError(f"--workers must be at least 1, not {opts.workers}")
    for p in problems:
        wanted_dtypes(cat.get(p), opts.dtypes)  # a --dtype a problem does not declare is refused before anything starts
    with tempfile.TemporaryDirectory(prefix=SCRATCH) as unpack:
        found = discover(opts.submissions, problems, Path(unpack) / "unpacked", skip=opts.out, known=tuple(cat.ids()))
        _out_apart(opts.out, opts.submissions, found.root)  # first: --out in a student's folder takes that student
        if not found.submissions and not found.unreadable:
            raise UsageError(f"no submissions in {opts.submissions}: it should hold one folder per student with "
                             f"PROBLEM.py files for {', '.join(problems)} (the files `torchcode start` writes)."
                             + where_they_are(found.root, problems, str(opts.submissions)))
        if not opts.problems:  # the assignment is what the class handed in, not every problem of the course
            handed_in = {s.problem for s in found.submissions} | {p for _, p in found.unreadable}
            problems = [p for p in problems if p in handed_in]
            con.print(f"Grading the problems the class submitted: {', '.join(problems)} (--problems names the "
                      "assignment; a problem no one submitted then counts as missing for everyone)", highlight=False)
        # a submission may read none of the class's files but its own, nor the gradebook and feedback
        opts.limits.protect = sorted({str(p.resolve()) for p in (found.root, opts.submissions, opts.out)})
        with Gradebook(opts.out) as book:
            _same_problems_loaded(book, cat, opts.out)
            seed = _seed(opts.seed, book, con)
            _header(con, found, problems, seed)
            return _grade(opts, cat, con, book, found, problems, seed)


def _grade(opts: Options, cat: Catalog, con: Console, book: Gradebook, found: Discovery, problems: list[str], seed: int) -> int:
    used = sorted({s.problem for s in found.submissions})
    pool = _pool(opts, used)
    if pool.backend == "local":  # no more warm sessions (a process importing torch each) than submissions
        pool.workers = min(pool.workers, max(1, len(found.submissions)))
    run_id, graded, errors, status, fps, entries = None, 0, dict(found.unreadable), "interrupted", {}, []
    interrupts.message = f"interrupted: the results graded so far are kept in {book.path}; run the same command again to grade the rest"
    try:
        device = opts.limits.device if opts.limits.device in ("cpu", "cuda") else None
        if device is None:  # "auto": what it means here is known once a session is up
            pool.start()
            device = pool.device
        dtypes = {p: wanted_dtypes(cat.get(p), opts.dtypes) for p in used}
        settings = {"device": device, "dtypes": opts.dtypes or "default", "limits": _limits(opts.limits)}
        if opts.gpu_dry_run:  # its advice is in the feedback: a run without it is graded again with it
            settings["gpu_dry_run"] = True
        fps = {p: fingerprint(cat.get(p), settings) for p in used}
        jobs = [s for s in found.submissions
                if not book.is_current(s.student, s.problem, s.sha256, s.fingerprint(fps[s.problem]), seed)]
        if jobs and not pool.started:
            if pool.backend == "local":  # nor than submissions left to grade
                pool.workers = min(pool.workers, len(jobs))
            pool.start()
        skipped = len(found.submissions) - len(jobs)
        con.print(f"{len(jobs)} to grade" + (f", {skipped} already graded (unchanged)" if skipped else "")
                  + (f" on {pool.workers} {pool.backend} worker{'s' * (pool.workers != 1)} ({device})" if jobs else ""),
                  highlight=False)
        run_id = book.start_run(seed, pool.backend, pool.workers or 0, skipped)
        left = {s.key: s for s in jobs}
        with _progress(con, len(jobs)) as advance:
            for outcome in pool.results(jobs, seed, dtypes, opts.gpu_dry_run):
                sub = outcome.submission
                left.pop(sub.key, None)
                if outcome.report is None:
                    errors[sub.key] = outcome.error
                else:
                    rep = dict(relabel(outcome.report, found.root.resolve(), "<class>"), file=f"{sub.student}/{sub.problem}.py")
                    row = Row(sub.student, sub.problem, rep.get("sha256") or sub.sha256, sub.fingerprint(fps[sub.problem]), seed,
                              rep["verdict"], rep["cases_passed"], rep["cases_total"],
                              score(rep["cases_passed"], rep["cases_total"], rep["verdict"]), rep["seconds"], rep)
                    with interrupts.deferred():  # a result is committed whole or not at all
                        book.put(row, run_id)
                    graded += 1
                advance(sub)
        for key in left:  # only if every worker stopped early (never expected): said, and tried again next run
            errors[key] = "the grading workers stopped before it was graded"
        if opts.bench:
            _bench(con, cat, book, pool, found, seed, fps)
        status = "done" if not errors else "incomplete"
    finally:
        with interrupts.deferred():
            pool.close()
            if run_id is not None:  # what is done is written out, also when the run was stopped
                book.finish_run(run_id, graded, status)
                entries = _entries(book, found, problems, seed, fps, errors)
                fb.write_all(opts.out, entries, seed=seed, problems=problems, unknown=found.unknown,
                             feedback=opts.feedback, bench=opts.bench, status=status, packs=_packs(cat, problems))
    fb.summary(con, entries, problems, bench=opts.bench)
    same: dict[tuple[str, str], list[str]] = {}  # one cause (a broken problem) said once, with whom it concerns
    for (student, problem), why in sorted(errors.items()):
        same.setdefault((problem, why), []).append(student)
    for (problem, why), students in same.items():
        con.print(f"not graded: {fb.who(students, problem)}: {inert(why)}", highlight=False, markup=False)
    con.print(f"Wrote {opts.out / 'grades.csv'}, grades.json"
              + (f" and feedback/ ({opts.feedback})" if opts.feedback != "none" else "")
              + f". Seed {seed}: rerun with --seed {seed} to grade on the same hidden inputs.", highlight=False, markup=False)
    return 1 if errors else 0


def _bench(con: Console, cat: Catalog, book: Gradebook, pool, found: Discovery, seed: int, fps: dict) -> None:
    """Time every accepted kernel not timed yet, one at a time (a timing is only fair alone), for the
    problems that declare benchmark sizes."""
    subs = {s.key: s for s in found.submissions}
    todo = [subs[(r.student, r.problem)] for r in book.rows() if r.verdict == "accepted" and r.bench is None
            and cat.get(r.problem).bench_sizes
            and (r.student, r.problem) in subs and r.sha256 == subs[(r.student, r.problem)].sha256
            and r.seed == seed and r.problem in fps
            and r.fingerprint == subs[(r.student, r.problem)].fingerprint(fps[r.problem])]
    if not todo:
        return
    if not pool.started:
        pool.start()
    con.print(f"Benchmarking {len(todo)} accepted kernel{'s' * (len(todo) != 1)} against the reference, one at a time",
              highlight=False)
    with _progress(con, len(todo), "timing") as advance:
        for sub in todo:
            outcome = pool.bench(sub)
            with interrupts.deferred():
                book.set_bench(sub.student, sub.problem, outcome.report or {"error": outcome.error})
            advance(sub)


def _pool(opts: Options, problems: list[str]):
    if opts.ray or opts.ray_address:
        from torchcode.classroom.ray_pool import RayPool

        return RayPool(opts.workers, opts.ray_address, opts.problems_dirs, opts.limits, opts.limits.device, problems)
    from torchcode.classroom.pool import LocalPool

    return LocalPool(opts.workers or os.cpu_count() or 1, opts.problems_dirs, opts.limits, opts.limits.device, problems)


def _entries(book: Gradebook, found: Discovery, problems: list[str], seed: int, fps: dict, errors: dict) -> list[fb.Entry]:
    rows = {(r.student, r.problem): r for r in book.rows()}
    subs = {s.key: s for s in found.submissions}
    entries = []
    for student in found.students:
        for p in problems:
            sub, row = subs.get((student, p)), rows.get((student, p))
            current = (sub is not None and row is not None and row.sha256 == sub.sha256 and row.seed == seed
                       and p in fps and row.fingerprint == sub.fingerprint(fps[p]))
            entries.append(fb.Entry(student, p, row if current else None, sub.sha256 if sub else "",
                                    errors.get((student, p), "")))
    fb.rank(entries)
    return entries


def _packs(cat: Catalog, problems: list[str]) -> dict[str, str]:
    """Problem -> its pack folder's name, for the problems not in the built-in course: the students have the pack
    under that name (the instructor's own path to it means nothing on their machine)."""
    from torchcode.paths import builtin_pack

    builtin = builtin_pack().resolve()
    return {p: cat.get(p).pack.resolve().name for p in problems if cat.get(p).pack.resolve() != builtin}


def _problems(cat: Catalog, asked: list[str] | None) -> list[str]:
    if not asked:
        return cat.ids()
    names = [p for item in asked for p in item.replace(",", " ").split()]
    if not names:
        raise UsageError("--problems names no problem: give ids or the numbers `torchcode list` prints, "
                         "e.g. --problems sdpa,gqa")
    # as every command takes them: a number `list` prints, any case, - for _ (an unknown one: ProblemNotFound)
    return list(dict.fromkeys(cat.get(p).id for p in names))


def _out_apart(out: Path, submissions: Path, root: Path) -> None:
    """--out beside the students' folders (or anywhere else), never the class folder itself nor inside a student's:
    there its files mixed with theirs (a rerun took feedback/ for a student, 'missing' everything, and a student's
    folder changed with every run, so it was graded again each time)."""
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} is a file: name a folder for the grades (it is created if needed)")
    if not submissions.is_dir():
        return  # a zip is unpacked elsewhere
    o, sub, root = out.resolve(), submissions.resolve(), root.resolve()
    beside = f"--out {shlex.quote(os.path.relpath(sub.parent / 'grades'))}"
    if o == sub or (root.is_relative_to(o) and o.is_relative_to(sub)):
        raise UsageError(f"--out {out} is the submissions folder itself: the grades and feedback would mix with the "
                         f"students' folders (a rerun would take feedback/ for a student). Write them beside it: {beside}")
    student = None
    if o.is_relative_to(root) and len(o.relative_to(root).parts) >= 2:
        student = o.relative_to(root).parts[0]
    elif o.parent == root and o.is_dir() and any(f.suffix == ".py" for f in o.iterdir()):
        # a student's own folder (as discovery counts them), not a grades folder among them: that holds no .py file
        student = o.name
    if student is not None:
        raise UsageError(f"--out {out} is inside the student folder {student}/: the class's grades would sit among "
                         f"that student's files (and change them at every run, or leave them ungraded). Write them "
                         f"elsewhere: {beside}")


def _same_problems_loaded(book: Gradebook, cat: Catalog, out: Path) -> None:
    """An earlier run into ``out`` graded a problem this run cannot load (its pack not given): refused before
    grades.csv and the feedback are written again without it (the gradebook keeps its results either way)."""
    gone = sorted({r.problem for r in book.rows()} - set(cat.ids()))
    if gone:
        raise UsageError(f"{out} holds grades for {', '.join(gone)}, which no problem pack given here has: add "
                         "--problems-dir PACK as in the earlier run (or grade into a new --out); this run would write "
                         "grades.csv and the feedback without them")


def _seed(asked: int | None, book: Gradebook, con: Console) -> int:
    stored = book.seed()
    seed = asked if asked is not None else stored if stored is not None else secrets.randbelow(2**31)
    if stored is not None and seed != stored:
        con.print(f"The seed changes from {stored} to {seed}: every submission is graded again.", highlight=False)
    if seed != stored:
        book.set_seed(seed)
    return seed


def _header(con: Console, found: Discovery, problems: list[str], seed: int) -> None:
    students, subs = len(found.students), len(found.submissions)
    con.print(f"{students} student{'s' * (students != 1)}, {subs} submission{'s' * (subs != 1)} for {len(problems)} "
              f"problem{'s' * (len(problems) != 1)}; seed {seed} (every student gets the same hidden inputs)",
              highlight=False)
    if found.unknown:
        n = len(found.unknown)
        con.print(f"{n} file{'s' * (n != 1)} or folder{'s' * (n != 1)} {'are' if n != 1 else 'is'} not "
                  f"{'submissions' if n != 1 else 'a submission'} (skipped):", highlight=False)
        for line in _grouped(found.unknown):
            con.print(f"  {inert(line)}", highlight=False, markup=False)


def _grouped(unknown: list[str], at_least: int = 3) -> list[str]:
    """The same file skipped for the same reason in many student folders (a notes.txt, another course's problem)
    is one line naming how many and the first few, not one line per student (grades.json lists every one)."""
    import re

    groups: dict[tuple[str, str], list[str]] = {}
    for u in unknown:
        m = re.match(r"^(?P<wrap>(?:.*/)?)(?P<student>[^/]+)/(?P<name>[^/:]+): (?P<why>.*)$", u)
        if m:
            groups.setdefault((m["wrap"] + "*/" + m["name"], m["why"]), []).append(m["student"])
    lines, said = [], set()
    for u in unknown:
        m = re.match(r"^(?P<wrap>(?:.*/)?)(?P<student>[^/]+)/(?P<name>[^/:]+): (?P<why>.*)$", u)
        key = (m["wrap"] + "*/" + m["name"], m["why"]) if m else None
        if key is None or len(groups[key]) < at_least:
            lines.append(u)
        elif key not in said:
            said.add(key)
            who = groups[key]
            why = m["why"]
            if why.startswith("not a problem being graded (a module"):  # in every folder: a pack's problem?
                why += (f"; if {m['name'][:-3]} is a problem of a pack, add --problems-dir PACK (or export "
                        "TORCHCODE_PROBLEMS=PACK)")
            lines.append(f"{m['wrap']}{m['name']} in {len(who)} student folders ({', '.join(who[:3])}"
                         f"{', ...' if len(who) > 3 else ''}): {why}")
    return lines


def _limits(limits) -> dict:
    from dataclasses import asdict

    d = asdict(limits) if limits is not None else {}
    d.pop("device", None)  # the resolved device is in the settings itself
    d.pop("protect", None)  # where the files are (a zip unpacks to a new folder each run) changes no result
    d.pop("imports_from", None)  # never set by grade: left out, so that older gradebooks stay current
    return d


class _progress:
    """A progress bar with ETA on a terminal; otherwise (CI logs, `| tee`) a plain line for the first result,
    then at most one every ``EVERY`` seconds, and one for the last: the run is never silent for minutes."""

    EVERY = 10.0

    def __init__(self, con: Console, total: int, what: str = "grading"):
        self.con, self.total, self.bar, self.what = con, total, None, what
        self.done, self.started, self.said = 0, 0.0, None

    def __enter__(self):
        import time

        self.started = time.monotonic()
        if self.con.is_terminal and self.total:
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                                       TimeRemainingColumn)

            self.bar = Progress(TextColumn(self.what), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                                TextColumn("ETA"), TimeRemainingColumn(), TextColumn("{task.description}", markup=False),
                                console=self.con, transient=False)
            self.bar.start()
            self.task = self.bar.add_task("", total=self.total)
        return self.advance

    def advance(self, sub) -> None:
        import time

        self.done += 1
        if self.bar is not None:
            self.bar.update(self.task, advance=1, description=inert_name(f"{sub.student}/{sub.problem}.py"))
            return
        now = time.monotonic()
        if self.said is not None and now - self.said < self.EVERY and self.done < self.total:
            return
        self.said = now
        elapsed = now - self.started
        left = elapsed / self.done * (self.total - self.done)
        self.con.print(f"{self.what} {self.done}/{self.total} ({self.done / self.total:.0%}), {_clock(elapsed)} elapsed"
                       + (f", about {_clock(left)} left" if self.done < self.total else "")
                       + f" (last: {inert_name(sub.student)}/{sub.problem}.py)", highlight=False, markup=False, soft_wrap=True)  # rich flushes: in the log now

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.stop()


def _clock(seconds: float) -> str:
    m, s = divmod(int(round(seconds)), 60)
    return f"{m // 60}:{m % 60:02d}:{s:02d}" if m >= 60 else f"{m}:{s:02d}"

"""`torchcode watch`: re-grade the learner's file on every save, in one warm grading session.

Three threads of control:

- a watcher thread (watchfiles) watches the file's folder and, when the file changes, flags it
  and cancels a grade still running on the older content (the newer one is graded instead);
- the main thread waits for the flag and has the session grade the file (the grader reads it once:
  a file caught mid-write is graded as it is then, and the write's end is another change, graded
  next), records the attempt like `check` and redraws the report;
- while a case runs longer than half a second, the progress display names it.

Ctrl-C ends it: the watcher stops, the session (its process, zygote and worker) is closed, exit 0.
A file that is not valid Python is a verdict (syntax error), a file that disappears (an editor
replacing it) is waited for, and a grading session that dies is restarted by the next grade.
"""

from __future__ import annotations

import errno
import os
import threading
import time
from pathlib import Path

from torchcode.commands import interrupts
from torchcode.commands.common import wanted_dtypes
from torchcode.commands.common import catalog, check_limits, display_path, resolve_target, store
from torchcode.errors import GraderError, StoreError, UsageError
from torchcode.progress import SEED_MAX, SEED_MIN
from torchcode.render import console, err_console

STEP_MS = 20  # a burst of writes ends when the file has been quiet this long
SLOW = 0.5  # a case running longer than this is named on screen


def run(target: str | None, problem: str | None, seed: int | None, limits, problems_dirs: list[Path] | None,
        dtypes: list[str] | None = None, gpu_dry_run: bool = False, file: str | None = None) -> int:
    try:
        import watchfiles  # noqa: F401  (imported here: only watch needs it)
    except ImportError:
        raise UsageError("`torchcode watch` needs the watchfiles package: pip install watchfiles") from None
    from torchcode.session import Session

    interrupts.message = "stopped watching"
    if seed is not None and not SEED_MIN <= seed <= SEED_MAX:
        raise UsageError(f"--seed must be a whole number from {SEED_MIN} to {SEED_MAX}, not {seed}")
    check_limits(limits)
    cat = catalog(problems_dirs)
    st = store()
    spec, path = resolve_target(cat, st, target, problem, "watch", file)
    wanted = wanted_dtypes(spec, dtypes)
    lock = _the_only_watch(path)  # held while this watch lives; the system lets it go when the process ends
    con = console()
    err = err_console()
    err.print(f"Watching {display_path(path)} for {spec.id}: every save is graded. Ctrl-C to stop.",
              markup=False, highlight=False)
    changed = threading.Event()
    changed.set()  # grade once at the start
    stop = threading.Event()
    session = Session(problems_dirs=[*(problems_dirs or []), *cat.remembered], limits=limits, device=limits.device)
    watcher = threading.Thread(target=_watch, args=(path, changed, stop, session), name="torchcode-watch", daemon=True)
    try:
        session.start()
        watcher.start()
        while True:
            while not changed.wait(0.2):
                if not watcher.is_alive():
                    raise UsageError(f"cannot watch {display_path(path.parent)} any more")
            changed.clear()
            _grade_once(session, spec, path, seed, wanted, st, con, err, gpu_dry_run)
    except KeyboardInterrupt:
        pass
    finally:
        with interrupts.deferred():  # the clean-up runs whole, whatever Ctrl-C comes meanwhile
            stop.set()
            session.close()
            if watcher.is_alive():
                watcher.join(timeout=5)
            _release(lock)
    interrupts.settle()  # Ctrl-C is how watch ends: not an interruption of something
    err.print("Stopped watching.", markup=False, highlight=False)
    return 0


def _the_only_watch(path: Path):
    """A second watch of the same file graded and recorded every save twice (each attempt twice in `history` and
    `status`): refused, naming the first. A store folder that cannot hold the lock file is no reason not to watch.

    The lock file is removed when its watch ends (``_release``), while still locked; so a watch that opened it just
    before and gets its lock then holds a file no longer there, and opens the one now at that name instead."""
    import hashlib

    try:
        import fcntl

        from torchcode.paths import home

        folder = home() / "watching"
        folder.mkdir(parents=True, exist_ok=True)
        name = folder / f"watch-{hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:16]}.lock"
    except (ImportError, OSError):
        return None
    for _ in range(100):
        try:
            lock = open(name, "a+")
        except OSError:
            return None
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):  # no locks there (NFS without lockd)
                lock.close()
                return None
            lock.seek(0)
            pid = lock.read().strip()
            lock.close()
            raise UsageError(f"{display_path(path)} is already watched by another `torchcode watch`"
                             + (f" (process {pid})" if pid.isdigit() else "") + ": every save would be graded and "
                             "recorded twice. Use that one, or stop it (Ctrl-C in its terminal) and watch again") from None
        if _names(lock):
            break
        lock.close()  # removed by the watch that held it, which has ended: the next watch's file is a new one
    else:
        return None
    lock.truncate(0)
    lock.write(str(os.getpid()))
    lock.flush()
    return lock


def _names(lock) -> bool:
    """Is the lock file we hold still the file at its name?"""
    try:
        at, held = os.stat(lock.name), os.fstat(lock.fileno())
    except OSError:
        return False
    return (at.st_dev, at.st_ino) == (held.st_dev, held.st_ino)


def _release(lock) -> None:
    """Remove our lock file while still holding its lock, then let go (a crash lets go too, leaving the file, which
    the next watch locks and removes in its turn)."""
    if lock is None:
        return
    try:
        if _names(lock):
            os.unlink(lock.name)
    except OSError:
        pass
    lock.close()


def _watch(path: Path, changed: threading.Event, stop: threading.Event, session) -> None:
    """Watch the folder, not the file: editors often replace a file (write another, rename it over)."""
    import watchfiles

    def is_ours(change, name: str) -> bool:
        return Path(name).name == path.name

    for _ in watchfiles.watch(path.parent, watch_filter=is_ours, step=STEP_MS, stop_event=stop,
                              recursive=False, raise_interrupt=False, ignore_permission_denied=True):
        session.cancel()  # a grade of the older content is pointless now (first: then the flag is seen)
        changed.set()


def _grade_once(session, spec, path: Path, seed, dtypes, st, con, err, gpu_dry_run: bool = False) -> None:
    from torchcode.session import Cancelled

    shown = display_path(path)
    if not path.is_file():
        err.print(f"{shown} is gone; waiting for it to be saved again.", markup=False, highlight=False)
        return
    progress = _Progress(con, err, shown)
    try:
        with progress:  # the grader reads the file once: what it grades is the file as it was then
            report = session.grade(spec.id, path, seed=seed, dtypes=dtypes, on_event=progress.event,
                                   gpu_dry_run=gpu_dry_run)
    except Cancelled:
        return  # the file changed during the grade: the newer content is graded next
    except UsageError as e:  # the file went away between the look and the grade
        err.print(f"{e}; waiting for the next save.", markup=False, highlight=False)
        return
    except GraderError as e:
        err.print(f"error: {e}", markup=False, highlight=False)
        err.print("The next save tries again.", markup=False, highlight=False)
        return
    note = _record(st, report, path)
    _show(con, report, shown, spec)
    if note:
        err.print(note, markup=False, highlight=False)
    for w in st.warnings:
        err.print(f"warning: {w}", markup=False, highlight=False)
    st.warnings.clear()


def _record(st, report, path: Path) -> str | None:
    from torchcode.progress.record import record_report

    with interrupts.deferred():  # an attempt is never recorded in half
        try:
            record_report(st, report, path)  # keeps the file's text if it is still the graded one
        except StoreError as e:
            return f"warning: progress not saved: {e}"
    return None


def _show(con, report, shown: str, spec) -> None:
    from rich.rule import Rule

    from torchcode.paths import builtin_pack
    from torchcode.render.report import report as render

    pack = display_path(spec.pack) if spec.pack.resolve() != builtin_pack().resolve() else None
    with con.capture() as drawn:  # drawn whole, then shown at once
        con.print(Rule(f"{shown} at {time.strftime('%H:%M:%S')}", style="dim"))
        render(con, report, display_file=shown, pack=pack, listed="`torchcode check --json` lists every case")
    if con.is_terminal:  # the screen is cleared for each report: say again what is going on
        con.clear()
        with con.capture() as footer:
            con.print(f"Watching {shown}: save it to grade it again, Ctrl-C to stop.", style="dim",
                      markup=False, highlight=False)
        drawn_text = drawn.get() + footer.get()
    else:
        drawn_text = drawn.get()
    con.file.write(drawn_text)
    con.file.flush()


def case_text(ev: dict) -> str:
    """A ``case`` event in words: which case, in which dtype, how far along."""
    again = ", again with new values" if ev.get("replay") else ""
    return f"case {ev.get('name')} ({ev.get('dtype')}{again}), {int(ev.get('index', 0)) + 1} of {ev.get('total')}"


class _Progress:
    """Names the running case once it has run for SLOW seconds: a transient status line on a terminal,
    one line per slow case otherwise (on stderr, so a pipe of reports stays reports)."""

    def __init__(self, con, err, shown: str):
        self.con, self.err, self.shown = con, err, shown
        self.lock = threading.Lock()
        self.case: tuple[str, float] | None = None  # (description, started at)
        self.said: str | None = None
        self.done = threading.Event()
        self.status = None
        self.ticker = threading.Thread(target=self._tick, name="torchcode-watch-progress", daemon=True)

    def __enter__(self):
        self.ticker.start()
        return self

    def __exit__(self, *exc):
        self.done.set()
        self.ticker.join()
        if self.status is not None:
            self.status.stop()
        return False

    def event(self, ev: dict) -> None:
        if ev.get("event") == "case":
            what = case_text(ev)
            with self.lock:
                self.case = (what, time.monotonic())

    def _tick(self) -> None:
        while not self.done.wait(0.1):
            with self.lock:
                if self.case is None or time.monotonic() - self.case[1] < SLOW or self.said == self.case[0]:
                    continue
                what = self.case[0]
                self.said = what
                if self.con.is_terminal:
                    text = f"Grading {self.shown}: {what}"
                    if self.status is None:
                        self.status = self.con.status(text)
                        self.status.start()
                    else:
                        self.status.update(text)
                else:
                    self.err.print(f"running {what}", markup=False, highlight=False)

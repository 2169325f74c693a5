"""`torchcode check`: grade a file, record the attempt, show the verdict.

Ctrl-C has one outcome wherever it lands: the "interrupted" message, exit 130, nothing
recorded, nothing printed on stdout, no worker or zygote left, no temporary directory left.
The attempt's record is the point of no return: the report is rendered (not yet printed)
before it, and printed after it.
"""

from __future__ import annotations

import contextlib
import json
import sys
import tempfile
from pathlib import Path

from torchcode.commands import interrupts
from torchcode.commands.common import (catalog, check_limits, display_path, resolve_target, store, wanted_dtypes,
                                      warn_store)
from torchcode.errors import StoreError, UsageError
from torchcode.grader.tree import CHECK_FOLDER, SCRATCH, remove_tree
from torchcode.progress import SEED_MAX, SEED_MIN
from torchcode.progress.record import record_report
from torchcode.render import console, err_console, progress_line
from torchcode.render.progress_line import ProgressLine
from torchcode.render.terminal import inert_name

INTERRUPTED = "interrupted: the check was stopped and nothing was recorded"


def run(target: str | None, problem: str | None, seed: int | None, as_json: bool, limits,
        problems_dirs: list[Path] | None, dtypes: list[str] | None = None, gpu_dry_run: bool = False,
        file: str | None = None) -> int:
    interrupts.message = INTERRUPTED
    if seed is not None and not SEED_MIN <= seed <= SEED_MAX:
        raise UsageError(f"--seed must be a whole number from {SEED_MIN} to {SEED_MAX} "
                         f"(the seed a check prints), not {seed}")
    check_limits(limits)
    cat = catalog(problems_dirs)
    st = store()
    spec, path = resolve_target(cat, st, target, problem, file=file)
    wanted = wanted_dtypes(spec, dtypes)
    with ProgressLine(inert_name(display_path(path)), enabled=progress_line.wanted(as_json),
                      limit=limits.time_limit or spec.grading.time_limit) as line:
        line.start()  # importing torch takes a second or more: the line says so after half a second
        from torchcode.grader.judge import Grader, resolve_device  # the only command that imports torch

        line.pause()  # no thread while the zygote is forked
        with _private_tempdir(), Grader(limits) as grader:  # forks the zygote before anything touches CUDA
            line.start()
            limits.device = resolve_device(limits.device)
            report = grader.grade(spec, path, seed=seed, dtypes=wanted, on_event=line.event, gpu_dry_run=gpu_dry_run)
    shown = json.dumps(report.to_dict(), indent=2) + "\n" if as_json else _rendered(report, path, spec)
    notes = []
    with interrupts.deferred():  # recording is never cut in half; a Ctrl-C before its commit cancels it
        try:
            record_report(st, report, path, before_commit=interrupts.check)
        except StoreError as e:
            interrupts.check()
            notes.append(f"warning: progress not saved: {e}")
        interrupts.settle()
    sys.stdout.write(shown)
    sys.stdout.flush()
    for note in notes:
        err_console().print(note, markup=False, highlight=False)
    warn_store(st)
    return 0 if report.passed else 1


def _rendered(report, path: Path, spec) -> str:
    from torchcode.paths import builtin_pack
    from torchcode.render.report import report as render

    con = console()
    pack = display_path(spec.pack) if spec.pack.resolve() != builtin_pack().resolve() else None
    with con.capture() as captured:
        render(con, report, display_file=display_path(path), pack=pack, listed="`--json` lists every case")
    return captured.get()


@contextlib.contextmanager
def _private_tempdir():
    """Every temporary file of this check goes under one folder, removed at the end whatever
    interrupts the check (the grader's own clean-up may be cut short by Ctrl-C)."""
    old, root = tempfile.tempdir, None
    try:
        with interrupts.deferred():
            root = tempfile.mkdtemp(prefix=SCRATCH)
            tempfile.tempdir = root
            CHECK_FOLDER[:] = [root]
        yield
    finally:
        with interrupts.deferred():
            tempfile.tempdir = old
            CHECK_FOLDER.clear()
            if root:
                remove_tree(root)

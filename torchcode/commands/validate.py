"""`torchcode validate`: prove problems are sound (stub fails, reference passes, mutants die)."""

from __future__ import annotations

from pathlib import Path

from torchcode.catalog import load_catalog
from torchcode.render import console


def run(problems: list[str] | None, problems_dirs: list[Path] | None, seeds: int, variants: bool = True) -> int:
    if seeds < 1:  # it was taken as 1, silently
        from torchcode.errors import UsageError

        raise UsageError(f"--seeds must be at least 1 (how many seeds the reference must pass on), not {seeds}")
    from torchcode.grader.judge import Grader  # before anything computes: the zygote forks here

    grader = Grader()
    try:
        cat = load_catalog(problems_dirs)
        if problems:
            ids = problems
            for pid in ids:
                if pid not in cat.problems and pid not in cat.broken:
                    cat.get(pid)  # raises ProblemNotFound with suggestions
        elif problems_dirs:
            packs = {p.expanduser().resolve() for p in problems_dirs}
            ids = sorted([s.id for s in cat.ordered() if s.pack in packs]
                         + [pid for pid, e in cat.broken.items() if Path(e.path).resolve().parents[2] in packs])
        else:
            ids = cat.ids() + sorted(cat.broken)
        from torchcode.authoring.validate import validate
        from torchcode.render.validate import problem as render, summary

        con, results = console(), []
        for i, pid in enumerate(ids):  # each problem shown as soon as it is done: a pack takes minutes
            with _status(f"validating {pid} ({i + 1} of {len(ids)})"):
                results += validate(cat, [pid], grader, tuple(range(max(1, seeds))), variants)
            render(con, results[-1])
    finally:
        grader.close()
    summary(con, results, variants)
    return 0 if all(r.ok for r in results) else 1


def _status(what: str):
    """A transient line on a terminal (stderr) while a problem is validated; nothing in a pipe."""
    import contextlib
    import sys

    if not sys.stderr.isatty():
        return contextlib.nullcontext()
    from torchcode.render import err_console

    return err_console().status(what)

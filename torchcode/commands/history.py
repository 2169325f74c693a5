"""`torchcode history`: a problem's attempts, the source of one, the diff between two; forgetting them.

Attempts are numbered 1, 2, ... per problem, oldest first (the numbers `history` prints).
"""

from __future__ import annotations

import sys
from pathlib import Path

from torchcode.commands.common import catalog, problem_or_last, shown_progress, store, warn_store
from torchcode.errors import UsageError


def run(problem: str | None, show: int | None, diff: tuple[int, int] | None,
        problems_dirs: list[Path] | None, as_json: bool = False) -> int:
    if show is not None and diff is not None:
        raise UsageError("use either --show N or --diff N M, not both")
    cat = catalog(problems_dirs)
    st = store()
    spec = problem_or_last(cat, st, problem, "history")
    attempts = shown_progress(lambda: st.history(spec.id), [])
    warn_store(st)
    if as_json and show is None and diff is None:
        import json

        keys = ("at", "verdict", "passed", "total", "seed", "seconds", "kernel_seconds", "sha256", "file")
        rows = [{"n": n, **{k: a[k] for k in keys}, "source_kept": a["has_source"]} for n, a in enumerate(attempts, 1)]
        print(json.dumps({"problem": spec.id, "attempts": rows}, indent=2))
        return 0
    if show is None and diff is None:
        from torchcode.render import console
        from torchcode.render.history import history

        history(console(), spec.id, attempts)
        return 0
    if show is not None:
        _write(_source(st, spec.id, attempts, show))
        return 0
    import difflib

    (a, b) = diff
    old, new = (_source(st, spec.id, attempts, n).decode("utf-8", "replace") for n in (a, b))
    lines = difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                 fromfile=_label(spec.id, attempts, a), tofile=_label(spec.id, attempts, b))
    text = "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)
    if not text:
        print(f"Attempts {a} and {b} of {spec.id} checked the same source.")
        return 0
    _write(text.encode())
    return 0


def _source(st, problem: str, attempts: list[dict], n: int) -> bytes:
    if not attempts:
        raise UsageError(f"no attempt of {problem} is recorded yet: `torchcode check {problem}` records one")
    if not 1 <= n <= len(attempts):
        raise UsageError(f"there is no attempt {n} of {problem}: `torchcode history {problem}` numbers them "
                         f"from 1 to {len(attempts)}")
    source = st.source(attempts[n - 1]["id"]) if attempts[n - 1]["has_source"] else None
    if source is None:
        raise UsageError(f"the source of attempt {n} of {problem} was not kept (it was recorded by an older "
                         "torchcode, the file changed while it was checked, or it was larger than 1 MB)")
    return source


def _label(problem: str, attempts: list[dict], n: int) -> str:
    from torchcode.render.history import when

    a = attempts[n - 1]
    return f"{problem} attempt {n} ({a['verdict']}, {when(a['at'])})"


def _write(data: bytes) -> None:
    """The source as it was to a pipe or file (`> mine.py` restores it); on a terminal shown inertly."""
    if sys.stdout.isatty():
        from torchcode.render.terminal import inert

        sys.stdout.write(inert(data.decode("utf-8", "replace")))
    else:
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
    sys.stdout.flush()


def forget(problem: str | None, yes: bool, problems_dirs: list[Path] | None) -> int:
    """`reset --progress`: forget a problem's attempts (its hints, files and other problems stay)."""
    import typer

    cat = catalog(problems_dirs)
    st = store()
    spec = problem_or_last(cat, st, problem, "reset")
    n = len(shown_progress(lambda: st.history(spec.id), []))
    if n == 0:
        typer.echo(f"No attempt of {spec.id} is recorded: nothing to forget.")
        return 0
    what = f"{n} attempt{'s' if n != 1 else ''} of {spec.id}"
    if not yes:
        if not sys.stdin.isatty():
            raise UsageError(f"this forgets {what} for good; pass --yes to do it")
        if not typer.confirm(f"Forget {what} (verdicts, times and sources)? Your files and hints stay.",
                             default=False):
            typer.echo("Nothing was forgotten.")
            return 0
    gone = st.forget_attempts(spec.id)
    warn_store(st)
    typer.echo(f"Forgot {gone} attempt{'s' if gone != 1 else ''} of {spec.id}; {spec.id} is now to do.")
    return 0

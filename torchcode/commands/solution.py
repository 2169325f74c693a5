"""`torchcode solution`: the reference kernel, after a confirmation unless already solved."""

from __future__ import annotations

import sys
from pathlib import Path

from torchcode.commands.common import catalog, shown_progress, store
from torchcode.errors import UsageError
from torchcode.render import console
from torchcode.scaffold import solution_source


def run(problem: str, yes: bool, problems_dirs: list[Path] | None) -> int:
    spec = catalog(problems_dirs).get(problem)
    st = store()
    if not yes and not shown_progress(lambda: st.is_solved(spec.id), False):
        if not sys.stdin.isatty():
            raise UsageError(f"you have not solved {spec.id} yet; pass --yes to see the reference anyway")
        import typer

        if not typer.confirm(f"You have not solved {spec.id} yet. Show the reference solution anyway?", default=False):
            typer.echo(f"Not shown. `torchcode hint {spec.id}` gives a nudge instead.")
            return 0
    source = solution_source(spec)
    if sys.stdout.isatty():
        from rich.syntax import Syntax

        console().print(Syntax(source, "python", line_numbers=False))
    else:
        sys.stdout.write(source)
    return 0

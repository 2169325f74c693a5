"""`torchcode new`: scaffold a problem in a pack folder."""

from __future__ import annotations

import os
from pathlib import Path

from torchcode.authoring.new import new_problem
from torchcode.render import console


def run(problem: str, kind: str, pack: Path, title: str | None) -> int:
    _not_taken(problem, pack)
    created = new_problem(problem, kind, pack, title)
    con = console()
    con.print(f"Created problem [bold]{problem}[/bold] ({kind}) in {created.pack}:")
    for f in created.files:
        con.print(f"  {os.path.relpath(f)}")
    con.print(f"It validates as written. Edit it, then: [bold]torchcode validate {problem} "
              f"--problems-dir {os.path.relpath(created.pack)}[/bold]")
    return 0


def _not_taken(problem: str, pack: Path) -> None:
    """An id another pack (the built-in course, TORCHCODE_PROBLEMS) defines would be defined twice: an error."""
    from torchcode.catalog import load_catalog
    from torchcode.errors import UsageError
    from torchcode.paths import builtin_pack

    spec = load_catalog(None).problems.get(problem)
    if spec is None or spec.pack.resolve() == pack.resolve():
        return  # (files that exist already are refused by name)
    where = "a built-in problem" if spec.pack.resolve() == builtin_pack().resolve() else f"a problem in {spec.pack}"
    raise UsageError(f"'{problem}' is already {where}, and an id defined twice is an error: pick another id")

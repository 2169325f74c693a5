"""`torchcode new`: scaffold a problem in a pack folder."""

from __future__ import annotations

import os
from pathlib import Path

from torchcode.authoring.new import new_problem
from torchcode.render import console


def run(problem: str, kind: str, pack: Path, title: str | None) -> int:
    created = new_problem(problem, kind, pack, title)
    con = console()
    con.print(f"Created problem [bold]{problem}[/bold] ({kind}) in {created.pack}:")
    for f in created.files:
        con.print(f"  {os.path.relpath(f)}")
    con.print(f"It validates as written. Edit it, then: [bold]torchcode validate {problem} "
              f"--problems-dir {os.path.relpath(created.pack)}[/bold]")
    return 0

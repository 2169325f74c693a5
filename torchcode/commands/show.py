"""`torchcode show`: the statement in the terminal."""

from __future__ import annotations

from pathlib import Path

from torchcode.commands.common import catalog, store
from torchcode.render import console
from torchcode.render.catalog import statement


def run(problem: str, problems_dirs: list[Path] | None) -> int:
    spec = catalog(problems_dirs).get(problem)
    statement(console(), spec, store().hints_revealed(spec.id))
    return 0

"""`torchcode show`: the statement in the terminal."""

from __future__ import annotations

from pathlib import Path

from torchcode.commands.common import catalog, shown_progress, store
from torchcode.render import console
from torchcode.render.catalog import statement


def run(problem: str, problems_dirs: list[Path] | None) -> int:
    spec = catalog(problems_dirs).get(problem)
    st = store()
    statement(console(), spec, shown_progress(lambda: st.hints_revealed(spec.id), 0))
    return 0

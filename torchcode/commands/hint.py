"""`torchcode hint`: reveal hints one at a time, in order."""

from __future__ import annotations

from pathlib import Path

from torchcode.commands.common import catalog, store, warn_store
from torchcode.render import console
from torchcode.render.catalog import hints


def run(problem: str, show_all: bool, problems_dirs: list[Path] | None) -> int:
    spec = catalog(problems_dirs).get(problem)
    st = store()
    con = console()
    if show_all:
        n = st.hints_revealed(spec.id)
        if n == 0:
            con.print(f"No hint revealed yet for {spec.id}. `torchcode hint {spec.id}` reveals the first.")
            return 0
        hints(con, spec, list(spec.hints[:n]), len(spec.hints), only_last=False)
        return 0
    n = st.reveal_hint(spec.id, len(spec.hints))
    warn_store(st)
    hints(con, spec, list(spec.hints[:n]), len(spec.hints), only_last=True)
    return 0

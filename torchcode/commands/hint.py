"""`torchcode hint`: reveal hints one at a time, in order."""

from __future__ import annotations

from pathlib import Path

from torchcode.commands.common import catalog, problem_or_last, shown_progress, store, warn, warn_store
from torchcode.errors import StoreError
from torchcode.render import console
from torchcode.render.catalog import hints


def run(problem: str | None, show_all: bool, problems_dirs: list[Path] | None) -> int:
    st = store()
    spec = problem_or_last(catalog(problems_dirs), st, problem, "hint")
    con = console()
    revealed = shown_progress(lambda: st.hints_revealed(spec.id), 0)
    if show_all:
        if revealed == 0:
            con.print(f"No hint revealed yet for {spec.id}. `torchcode hint {spec.id}` reveals the first.")
            return 0
        hints(con, spec, list(spec.hints[:revealed]), len(spec.hints), only_last=False)
        return 0
    n = min(revealed + 1, len(spec.hints))
    unsaved = None
    try:
        n = st.reveal_hint(spec.id, len(spec.hints))
    except StoreError as e:
        unsaved = e
    warn_store(st)
    hints(con, spec, list(spec.hints[:n]), len(spec.hints), only_last=True)
    if unsaved:
        warn(f"hint {n} is shown but could not be recorded as revealed: {unsaved}")
    return 0

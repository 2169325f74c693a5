"""`torchcode status`: the progress dashboard."""

from __future__ import annotations

from pathlib import Path

from torchcode.commands.common import catalog, shown_progress, store, warn_store
from torchcode.render import console
from torchcode.render.catalog import dashboard


def run(problems_dirs: list[Path] | None) -> int:
    cat = catalog(problems_dirs)
    st = store()
    progress = shown_progress(st.progress, {})
    warn_store(st)
    dashboard(console(), cat.ordered(), progress)
    elsewhere = sorted(pid for pid, pr in progress.items() if pid not in cat.problems and pr.attempts)
    if elsewhere:  # checked before, from a pack this command was not given: said, not silently left out
        console().print(f"[dim]Not shown: {', '.join(elsewhere)}, checked before from a problem pack not loaded here "
                        "(add --problems-dir PACK, or run `torchcode status` in the folder you started them in).[/dim]")
    return 0

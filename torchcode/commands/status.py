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
    return 0

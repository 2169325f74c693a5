"""`torchcode start` and `torchcode reset`: write the stub, remember which file this directory works on."""

from __future__ import annotations

from pathlib import Path

from torchcode.commands.common import catalog, display_path, learner_file, store, warn_store
from torchcode.errors import StoreError
from torchcode.render import console, err_console
from torchcode.scaffold import write_stub


def _remember(spec, path: Path) -> None:
    st = store()
    try:
        st.mark_started(Path.cwd(), spec.id, path)
    except StoreError as e:
        err_console().print(f"warning: {e}", markup=False, highlight=False)
    warn_store(st)


def start(problem: str, file: Path | None, force: bool, problems_dirs: list[Path] | None) -> int:
    spec = catalog(problems_dirs).get(problem)
    path = (file or Path(f"{spec.id}.py")).resolve()
    written = write_stub(spec, path, force=force)
    _remember(spec, path)
    con = console()
    if written.backup:
        con.print(f"Backed up the old file to {display_path(written.backup)}")
    con.print(f"Wrote [bold]{display_path(path)}[/bold]: {spec.title} ({spec.difficulty}).")
    con.print(f"Implement [bold]{spec.entry.name}[/bold], then run [bold]torchcode check[/bold]. "
              f"Stuck? [bold]torchcode hint {spec.id}[/bold]")
    return 0


def reset(problem: str, problems_dirs: list[Path] | None) -> int:
    spec = catalog(problems_dirs).get(problem)
    path = learner_file(store(), spec, Path.cwd())
    written = write_stub(spec, path, force=True)
    _remember(spec, path)
    con = console()
    if written.backup:
        con.print(f"Your previous file is kept as {display_path(written.backup)}")
    con.print(f"Restored the stub in [bold]{display_path(path)}[/bold].")
    return 0

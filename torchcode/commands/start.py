"""`torchcode start` and `torchcode reset`: write the stub, remember which file this directory works on."""

from __future__ import annotations

import os
from pathlib import Path

from typer import echo, style

from torchcode.commands import interrupts
from torchcode.commands.common import catalog, display_path, learner_file, problem_or_last, store
from torchcode.errors import StoreError
from torchcode.scaffold import write_stub

# start and reset print a few lines: typer's echo instead of rich's console (~30 ms of imports)


def _named_pack(spec, problems_dirs: list[Path] | None) -> Path | None:
    """The pack ``spec`` comes from as it was named (--problems-dir, else TORCHCODE_PROBLEMS), absolute but not
    resolved; None for the built-in course."""
    from torchcode.paths import extra_packs, pack_as_named

    return pack_as_named(spec.pack, extra_packs(problems_dirs))


def _remember(spec, path: Path, problems_dirs: list[Path] | None = None) -> bool:
    """Record what this folder works on (and the pack it comes from); False if that could not be saved."""
    st = store()
    saved = True
    try:
        st.mark_started(Path.cwd(), spec.id, path, _named_pack(spec, problems_dirs))
    except StoreError as e:
        echo(f"warning: {e}", err=True)
        saved = False
    for w in st.warnings:
        echo(f"warning: {w}", err=True)
    return saved


def start(problem: str, file: Path | None, force: bool, problems_dirs: list[Path] | None,
          notebook: bool = False) -> int:
    spec = catalog(problems_dirs).get(problem)
    if notebook:
        return _start_notebook(spec, file, force)
    path = _into_folder(file, spec.id, ".py")
    with interrupts.deferred():  # a Ctrl-C never leaves half a stub, nor a backup not said
        written = write_stub(spec, path, force=force)
        remembered = _remember(spec, path, problems_dirs)
        interrupts.settle()
    if written.backup:
        echo(f"Backed up the old file to {display_path(written.backup)}")
    echo(f"Wrote {style(display_path(path), bold=True)}: {spec.title} ({spec.difficulty}).")
    pack = _pack_only_named_here(spec, problems_dirs)
    if pack and remembered:  # the folder's next commands must really find it (a pack beside it may clash)
        remembered = catalog(None).find(spec.id) is not None
    extra = f" --problems-dir {pack}" if pack and not remembered else ""
    echo(f"Implement {style(spec.entry.name, bold=True)}, then run {style('torchcode check' + extra, bold=True)}."
               f" Stuck? {style(f'torchcode hint {spec.id}{extra}', bold=True)}")
    if pack and remembered:  # the next commands run here find it (catalog() reads the store)
        echo(f"{spec.id} comes from the problem pack {pack}: commands run in this folder find it; elsewhere add "
             f"--problems-dir {pack}")
    elif pack:  # without it, the next `check` said "no problem named ..."
        echo(f"{spec.id} comes from the problem pack {pack}: every command needs it, with --problems-dir or once "
             f"for this shell: export TORCHCODE_PROBLEMS={pack}")
    return 0


def _pack_only_named_here(spec, problems_dirs: list[Path] | None) -> str | None:
    """The pack (shell-quoted) a problem comes from when only this command line named it (not TORCHCODE_PROBLEMS)."""
    import shlex

    from torchcode.paths import extra_packs

    pack = spec.pack.resolve()
    from_env = {p.resolve() for p in extra_packs([])}
    named = [p for p in problems_dirs or [] if Path(p).expanduser().resolve() == pack]
    if pack in from_env or not named:
        return None
    return shlex.quote(os.path.abspath(Path(named[0]).expanduser()))  # absolute: the export holds in any folder


def _into_folder(file: str | Path | None, pid: str, suffix: str) -> Path:
    """``-o FILE``, or ``-o FOLDER`` for FOLDER/PROBLEM.py: a folder that exists, or a name ending in a slash (a
    folder to make: `-o newdir/` wrote a file named newdir)."""
    folder = file is not None and str(file).endswith(("/", os.sep))
    path = Path(file or f"{pid}{suffix}").resolve()
    path = path / f"{pid}{suffix}" if folder or path.is_dir() else path
    for parent in path.parents:  # -o notes.txt/gqa.py said "cannot write ...: File exists"
        if parent.exists():
            if not parent.is_dir():
                from torchcode.errors import UsageError

                raise UsageError(f"cannot write {display_path(path)}: {display_path(parent)} is a file, not a folder")
            break
    return path


def _start_notebook(spec, file: Path | None, force: bool) -> int:
    """A notebook is not remembered as this directory's file: `check` grades Python files."""
    from torchcode.scaffold.notebook import render_notebook

    path = _into_folder(file, spec.id, ".ipynb")
    written = write_stub(spec, path, force=force, text=render_notebook(spec))
    if written.backup:
        echo(f"Backed up the old file to {display_path(written.backup)}")
    echo(f"Wrote {style(display_path(path), bold=True)}: {spec.title} ({spec.difficulty}).")
    echo(f"Open it in Jupyter (its kernel needs torchcode and ipykernel: `pip install ipykernel` where torchcode is "
         f"installed), fill in the "
         f"{style(f'%%torchcode {spec.id}', bold=True)} cell and run it to grade it.")
    return 0


def _is_the_stub(spec, path: Path) -> bool:
    from torchcode.scaffold import render_stub

    try:
        return not path.is_symlink() and path.is_file() and path.read_bytes() == render_stub(spec).encode("utf-8")
    except OSError:
        return False


def reset(problem: str | None, problems_dirs: list[Path] | None) -> int:
    st = store()
    spec = problem_or_last(catalog(problems_dirs), st, problem, "reset")
    path = learner_file(st, spec, Path.cwd())
    if _is_the_stub(spec, path):  # a backup of the stub itself is only clutter beside the file
        _remember(spec, path, problems_dirs)
        echo(f"{display_path(path)} is the stub already: nothing to restore.")
        return 0
    with interrupts.deferred():  # a Ctrl-C never leaves half a stub, nor a backup not said
        written = write_stub(spec, path, force=True)
        _remember(spec, path, problems_dirs)
        interrupts.settle()
    if written.backup:
        echo(f"Your previous file is kept as {display_path(written.backup)}")
    echo(f"Restored the stub in {style(display_path(path), bold=True)}.")
    return 0

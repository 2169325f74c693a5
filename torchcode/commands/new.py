"""`torchcode new`: scaffold a problem in a pack folder."""

from __future__ import annotations

import os
from pathlib import Path

from torchcode.authoring.new import new_problem
from torchcode.render import console


def run(problem: str, kind: str, pack: Path, title: str | None) -> int:
    _a_usable_name(problem, kind)
    _not_taken(problem, pack)
    from torchcode.errors import UsageError

    if pack.exists() and not pack.is_dir():
        raise UsageError(f"--dir {pack} is a file: name the pack's folder (it is created if needed)")
    try:
        created = new_problem(problem, kind, pack, title)
    except OSError as e:  # a read-only folder, a full disk: what was written is said, nothing is hidden
        raise UsageError(f"cannot write the problem into {pack}: {e.strerror or e}"
                         + (f" ({e.filename})" if e.filename else "") + ". Pick a folder you can write with --dir, "
                         "and remove any files of it already written there") from None
    con = console()
    con.print(f"Created problem [bold]{problem}[/bold] ({kind}) in {created.pack}:")
    for f in created.files:
        con.print(f"  {os.path.relpath(f)}")
    con.print(f"It validates as written. Edit it, then: [bold]torchcode validate {problem} "
              f"--problems-dir {os.path.relpath(created.pack)}[/bold]")
    return 0


# what the function scaffold's files import: a function of that name would hide it (`new torch` wrote a reference
# whose torch.softmax was the function itself)
_SCAFFOLD_NAMES = {"math", "torch"}


def _a_usable_name(problem: str, kind: str) -> None:
    """A function problem is named after its id: a Python keyword cannot be (`new class` wrote a reference and a
    stub that were not Python, after saying 'It validates as written')."""
    import keyword

    from torchcode.errors import UsageError

    if kind != "function":
        return  # a module's class is the id in CamelCase (class -> Class): any valid id is a class name
    if keyword.iskeyword(problem):
        raise UsageError(f"'{problem}' is a Python keyword: a function problem's entry point is named after its id, "
                         f"and `def {problem}(...)` is not Python. Pick another id (e.g. {problem}_attention)")
    if problem in _SCAFFOLD_NAMES:
        raise UsageError(f"'{problem}' is a name the scaffold's code imports (`{problem}`): a function named so "
                         f"would hide it. Pick another id (e.g. {problem}_attention)")


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

"""Where things live: the built-in course, extra problem packs, and user state.

``TORCHCODE_HOME`` moves all user state (the progress database, backups) aside;
tests always set it.
"""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent


def builtin_pack() -> Path:
    """The folder holding problems/, solutions/ and templates/ of the built-in course.

    In a wheel they are copied under ``torchcode/_builtin``; in a source checkout
    (editable install, running the tests) they are the top-level folders.
    """
    shipped = PACKAGE_DIR / "_builtin"
    if (shipped / "problems").is_dir():
        return shipped
    return PACKAGE_DIR.parent


def pack_to_record(pack: Path) -> Path | None:
    """What the store keeps as a started problem's pack: None for the built-in course; else the path as named, made
    absolute but not resolved (a `current` symlink a course re-points stays the pack's name)."""
    if Path(pack).resolve() == builtin_pack().resolve():
        return None
    return Path(os.path.abspath(pack))


def pack_as_named(pack: Path, named: list[Path]) -> Path | None:
    """``pack_to_record`` of ``pack`` (a loaded problem's, resolved) under the name a command gave it in ``named``
    (its --problems-dir and TORCHCODE_PROBLEMS entries), so a symlink stays a symlink."""
    given = next((p for p in named if Path(p).expanduser().resolve() == Path(pack).resolve()), pack)
    return pack_to_record(Path(given).expanduser())


def extra_packs(cli_dirs: list[Path] | None = None) -> list[Path]:
    """Problem packs from ``--problems-dir`` and the ``TORCHCODE_PROBLEMS`` path list."""
    packs = [Path(p) for p in (cli_dirs or [])]
    env = os.environ.get("TORCHCODE_PROBLEMS", "")
    packs += [Path(p) for p in env.split(os.pathsep) if p.strip()]
    return packs


def home() -> Path:
    """The user data directory (created on demand by whoever writes into it), always absolute: it is
    protected from submissions, which run in another directory."""
    env = os.environ.get("TORCHCODE_HOME")
    if env:
        return Path(env).expanduser().resolve()
    from platformdirs import user_data_dir

    return Path(user_data_dir("torchcode", appauthor=False))


def progress_db() -> Path:
    return home() / "progress.sqlite3"

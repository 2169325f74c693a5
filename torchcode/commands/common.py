"""What several commands share: loading the catalog, opening the store, finding the learner's file."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, TypeVar

from torchcode.catalog import Catalog, ProblemSpec, load_catalog
from torchcode.catalog.spec import DTYPES
from torchcode.errors import StoreError, UsageError
from torchcode.progress import Store

T = TypeVar("T")


def catalog(problems_dirs: list[Path] | None) -> Catalog:
    """The built-in course, the packs named (--problems-dir, TORCHCODE_PROBLEMS) and the packs of the problems
    started in this folder, the latest first: `start X --problems-dir PACK` then `check` finds X
    (``Catalog.remembered``; a grading session started here needs them too). One that cannot be added is left out
    alone, and why is kept for the message that needs it (``Catalog.unloaded``)."""
    from torchcode.catalog import with_remembered

    started = _started_packs(Path.cwd())
    cat = with_remembered(problems_dirs, list(dict.fromkeys(map(Path, started.values()))), started)
    if cat.broken:
        for pid, err in sorted(cat.broken.items()):
            warn(f"problem '{pid}' is skipped: {err}")
    return cat


def _started_packs(directory: Path) -> dict[str, str]:
    """problem -> the pack it was started from in ``directory``, the latest started first."""
    try:
        return Store().started_packs(directory)
    except (StoreError, OSError):
        return {}  # the progress read that follows says what is wrong with the store


def store() -> Store:
    return Store()


def warn(message: str) -> None:
    from torchcode.render import err_console

    err_console().print(f"warning: {message}", markup=False, highlight=False)


def warn_store(st: Store) -> None:
    for w in st.warnings:
        warn(w)
    st.warnings.clear()


def shown_progress(read: Callable[[], T], default: T) -> T:
    """A read of the store for display: a store that cannot be read is a warning, not a failure."""
    try:
        return read()
    except StoreError as e:
        warn(f"your progress cannot be shown: {e}")
        return default


def display_path(path: Path) -> str:
    try:
        return os.path.relpath(path)
    except ValueError:
        return str(path)


def learner_file(st: Store, spec: ProblemSpec, cwd: Path) -> Path:
    """The file this directory works on for ``spec``: the one ``start`` wrote, else ./<id>.py."""
    recorded = shown_progress(lambda: st.started_file(cwd, spec.id), None)
    return Path(recorded) if recorded else cwd / f"{spec.id}.py"


def problem_or_last(cat: Catalog, st: Store, problem: str | None, command: str) -> ProblemSpec:
    """``problem`` as typed, or (when left out) the problem started last in this directory, as for check."""
    if problem is not None:
        spec = cat.get(problem)
    else:
        last = shown_progress(lambda: st.last_started(Path.cwd()), None)
        if last is None:
            raise UsageError(f"nothing has been started in this directory: name the problem, "
                             f"`torchcode {command} PROBLEM` (see `torchcode list`)")
        spec = _started(cat, last[0], command)
    repoint(st, spec, cat.named)
    return spec


def repoint(st: Store, spec: ProblemSpec, named: list[Path] = ()) -> None:
    """A problem started here from a pack that has moved, found now in a pack this command was given: the folder
    remembers the new place (`check --problems-dir NEW` once, then `check` again), by the path given (``named``:
    the packs as the command named them; a symlink stays a symlink)."""
    from torchcode.paths import pack_as_named

    old = shown_progress(lambda: st.started_packs(Path.cwd()), {}).get(spec.id)
    new = pack_as_named(spec.pack, named)
    if old is None or new is None or Path(old).is_dir():
        return
    try:
        st.repoint_pack(Path.cwd(), spec.id, new)
    except StoreError:
        return  # read-only: the next command names the pack again
    warn(f"{spec.id} was started here from the pack {old}, which is no longer there: this folder now remembers "
         f"{display_path(new)}")


def _started(cat: Catalog, pid: str, command: str) -> ProblemSpec:
    """The problem started last here; one from a pack this command was not given is said so, not 'no problem'."""
    if cat.find(pid) is None:
        pack = shown_progress(lambda: store().started_packs(Path.cwd()), {}).get(pid)
        if pack:  # recorded, but gone or not loadable beside the others
            why = "is no longer there" if not Path(pack).is_dir() else (
                f"cannot be loaded here ({cat.unloaded.get(pack, 'it no longer holds ' + pid)})")
            raise UsageError(f"{pid} was started in this directory from the problem pack {pack}, which {why}: add "
                             f"--problems-dir PACK once (`torchcode {command} --problems-dir PACK`), naming where it is "
                             "now, and this folder remembers that")
        raise UsageError(f"{pid} was started in this directory from a problem pack this command was not given: "
                         f"add --problems-dir PACK (`torchcode {command} --problems-dir PACK`), or once for this "
                         "shell: export TORCHCODE_PROBLEMS=PACK")
    return cat.get(pid)


def resolve_target(cat: Catalog, st: Store, target: str | None, problem: str | None,
                   command: str = "check", file: str | None = None) -> tuple[ProblemSpec, Path]:
    """``check`` / ``check gqa`` / ``check path.py --problem gqa`` / ``check gqa path.py`` -> (spec, file)."""
    spec, path = _target(cat, st, target, problem, command, file)
    repoint(st, spec, cat.named)
    if not path.exists() and not path.is_symlink():  # the file `start` wrote for this folder, deleted or moved since
        raise UsageError(f"no file {display_path(path)} to {command}: it was deleted or moved since `torchcode start "
                         f"{spec.id}`. `torchcode reset {spec.id}` writes the stub again, or name the file: "
                         f"`torchcode {command} FILE --problem {spec.id}`")
    readable(path, command)
    return spec, path


def readable(path: Path, command: str = "check") -> None:
    from torchcode.errors import Unreadable

    Unreadable.check(path, display_path(path), command)


def _target(cat: Catalog, st: Store, target: str | None, problem: str | None,
            command: str, file: str | None) -> tuple[ProblemSpec, Path]:
    cwd = Path.cwd()
    if file is not None:  # `check PROBLEM FILE` (or FILE PROBLEM): the same as `check FILE --problem PROBLEM`
        if cat.find(file) is not None and cat.find(target) is None:
            target, file = file, target
        if problem is not None:
            raise UsageError(f"name the problem once: `torchcode {command} {target} {file}` or "
                             f"`torchcode {command} {file} --problem {problem}`")
        target, problem = file, target
    if target is None:
        if problem:
            spec = cat.get(problem)
            path = learner_file(st, spec, cwd)
            if not path.is_file():
                raise UsageError(f"no file {display_path(path)} to {command}. Run `torchcode start {spec.id}` first, "
                                 f"or `torchcode {command} FILE --problem {spec.id}`.")
            return spec, path
        last = st.last_started(cwd)
        if last is None:
            raise UsageError("nothing has been started in this directory. Run `torchcode start PROBLEM`, or name "
                             f"what to {command}: `torchcode {command} PROBLEM` or `torchcode {command} FILE --problem PROBLEM`.")
        return _started(cat, last[0], command), Path(last[1])
    as_path = Path(target)
    if as_path.is_dir():
        raise UsageError(_a_folder(cat, as_path, target, command))
    if as_path.suffix == ".ipynb":
        pid = problem or cat.find(as_path.stem) or "PROBLEM"
        raise UsageError(f"{target} is a notebook: run its `%%torchcode {pid}` cell in Jupyter to grade it. "
                         f"`torchcode {command}` grades a Python file: `torchcode start {pid}` writes {pid}.py")
    looks_like_file = target.endswith(".py") or os.sep in target or as_path.is_file()
    if looks_like_file:
        if not as_path.is_file():
            if as_path.exists():  # a named pipe (reading it would wait forever), a device, a socket
                raise UsageError(f"{target} is not a regular file (a pipe or a device): name the .py file you edit")
            raise UsageError(f"no such file: {target}{_did_you_mean(as_path)}")
        pid = problem or (None if as_path.stem.isdigit() else cat.find(as_path.stem))  # a list number is no file name
        if pid is None and as_path.stem in cat.moved:  # started here from a pack that has moved: say that
            cat.get(as_path.stem)
        if pid is None:
            raise UsageError(f"cannot tell which problem {target} solves: " + _started_elsewhere(as_path, command))
        return cat.get(pid), as_path.resolve()
    spec = cat.get(target)
    if problem and cat.get(problem).id != spec.id:
        raise UsageError(f"conflicting problems: '{target}' and --problem '{problem}'")
    path = learner_file(st, spec, cwd)
    if not path.is_file():
        raise UsageError(f"no file {display_path(path)} to {command}. Run `torchcode start {spec.id}` first, "
                         f"or `torchcode {command} FILE --problem {spec.id}`.")
    return spec, path


def _started_elsewhere(path: Path, command: str) -> str:
    """What to add when a file names no problem loaded here: the pack it was started from in its own folder
    (`check student/x.py` run from the parent of a folder that remembers its pack), else --problem."""
    folder = path.resolve().parent
    pack = _started_packs(folder).get(path.stem) if folder != Path.cwd().resolve() else None
    if pack is None:
        return "add --problem PROBLEM"
    return (f"{path.stem} was started in {display_path(folder)} from the problem pack {pack}. Run `torchcode {command}` "
            f"in that folder, or add --problems-dir {pack}")


def _a_folder(cat: Catalog, folder: Path, typed: str, command: str) -> str:
    """What to say when a folder is named where one file is graded: the files in it that `check` can grade."""
    found = []
    for f in sorted(folder.glob("*.py")):
        pid = cat.find(f.stem)
        if pid is not None:
            found.append(f"`torchcode {command} {display_path(f)}`")
    msg = f"{typed if typed.strip() else repr(typed) + ' (an empty name: this folder)'} is a folder; name one file in it"
    if found:
        shown = ", ".join(found[:4]) + (f" and {len(found) - 4} more" if len(found) > 4 else "")
        msg += f": {shown}"
    else:
        msg += " (it holds no PROBLEM.py file)"
    return msg + ". To grade a class's folders, use `torchcode grade FOLDER`."


def _did_you_mean(path: Path) -> str:
    import difflib

    folder = path.parent if str(path.parent) else Path(".")
    try:
        names = [f.name for f in folder.iterdir() if f.suffix == ".py" and f.is_file()]
    except OSError:
        return ""
    close = difflib.get_close_matches(path.name, names, n=3)
    return f". Did you mean: {', '.join(str(folder / c) if str(path.parent) != '.' else c for c in close)}?" if close else ""


def check_limits(limits) -> None:
    """--time-limit, --total-time-limit and --memory-limit as typed: a bad one is the user's argument, not a verdict
    on the code (a limit of 0 s said the file took too long to import)."""
    import math

    for flag, value in (("--time-limit", limits.time_limit), ("--total-time-limit", limits.total_limit)):
        if value is not None and not (math.isfinite(value) and value > 0):
            raise UsageError(f"{flag} must be a number of seconds above 0, not {value:g}")
    if not limits.memory_mb > 0:
        raise UsageError(f"--memory-limit must be a number of MB above 0, not {limits.memory_mb}")


def wanted_dtypes(spec, asked: list[str] | None) -> list[str] | None:
    """The dtypes a --dtype option asks of ``spec`` (None: the device's default; ["all"]: every one it declares)."""
    if not asked:
        return None  # the default for the device
    if asked == ["all"]:
        return list(spec.grading.dtypes)
    if "all" in asked:
        raise UsageError(f"--dtype all already grades every dtype {spec.id} declares: give it alone, "
                         f"not with {', '.join(d for d in asked if d != 'all')}")
    unknown = [d for d in asked if d not in DTYPES]
    if unknown:
        raise UsageError(f"--dtype must be one of {', '.join(DTYPES)} or all, not {', '.join(unknown)}")
    undeclared = [d for d in asked if d not in spec.grading.dtypes]
    if undeclared:
        raise UsageError(f"{spec.id} is not graded in {', '.join(undeclared)}; it declares {', '.join(spec.grading.dtypes)}")
    return asked

"""The exceptions torchcode raises for problems a user can fix.

The CLI turns every ``TorchcodeError`` into one message and exit code 2 at a single
boundary (``torchcode.cli``); anything else is a bug and keeps its traceback.
A wrong *submission* is never an error: it is a verdict (see ``torchcode.grader.result``).
"""

from __future__ import annotations


class TorchcodeError(Exception):
    """Base class: ``str(err)`` is a complete message for the user."""

    exit_code = 2


class ProblemNotFound(TorchcodeError):
    def __init__(self, problem_id: str, known: list[str]):
        import difflib

        close = difflib.get_close_matches(problem_id, known, n=3)
        msg = f"no problem named '{problem_id}'."
        here = _pack_holding(problem_id)
        if here is not None:  # an author in their pack, or a learner beside it, who left out --problems-dir
            msg += (f" It is in the problem pack {here}: add --problems-dir {here} (or once for this shell: "
                    f"export TORCHCODE_PROBLEMS={here.resolve()})")
        elif close:
            msg += " Did you mean: " + ", ".join(close) + "?"
        else:
            msg += " Run `torchcode list` to see them all."
        super().__init__(msg)
        self.problem_id = problem_id


def _pack_holding(problem_id: str):
    """This folder, or a pack folder in it, when it holds problems/<problem_id>/problem.toml (not yet named)."""
    from pathlib import Path

    if not problem_id.replace("_", "").isalnum():  # never a path taken from what was typed
        return None
    try:
        packs = [Path("."), *sorted(p for p in Path(".").iterdir() if p.is_dir() and not p.name.startswith("."))]
    except OSError:  # this folder cannot be listed
        packs = [Path(".")]
    for pack in packs:
        try:
            if (pack / "problems" / problem_id / "problem.toml").is_file():
                return pack
        except OSError:
            continue
    return None


class SpecError(TorchcodeError):
    """A problem folder is malformed: names the file, the field and the fix."""

    def __init__(self, path, field: str | None, problem: str, fix: str = ""):
        where = f"{path}" + (f": field '{field}'" if field else "")
        msg = f"invalid problem spec {where}: {problem}"
        if fix:
            msg += f". Fix: {fix}"
        super().__init__(msg)
        self.path = path
        self.field = field
        self.problem, self.fix = problem, fix  # the parts, for `validate`'s own what / file / fix lines


class UsageError(TorchcodeError):
    """Bad arguments, a missing file, nothing started here, and the like."""


class Unreadable(UsageError):
    """A learner's file that cannot be read: theirs to fix (exit 2, nothing recorded), never a verdict."""

    @classmethod
    def check(cls, path, shown: str | None = None, command: str = "check") -> None:
        """Raise when ``path`` cannot be read. As root the permission bits still count: the grader's worker gives
        up root's powers, so it could not read the file either (it was graded 'Runtime error' and recorded)."""
        import os
        import shlex

        why = None
        try:
            with open(path, "rb"):
                pass
            st = os.stat(path)
        except FileNotFoundError:  # a dangling link, or gone since it was named
            raise cls(f"no such file: {shown or path}") from None
        except OSError as e:
            why = e.strerror or str(e)
        if why is None and not cls.allowed(st, "r"):
            why = "Permission denied"
        if why is not None:
            shown = shown or str(path)
            raise cls(f"cannot read {shown}: {why}. Make it readable (`chmod u+r {shlex.quote(shown)}`), "
                      f"then {command} it again")

    @staticmethod
    def allowed(st, what: str) -> bool:
        """Whether the permission bits ``what`` ("r", "rx") of a file's ``os.stat`` let this user in, root included:
        the grader's worker gives up root's powers, so for it root's bypass does not hold."""
        import os
        import stat

        if os.geteuid() != 0:
            return True  # the system already said (open, listdir)
        who = 0 if st.st_uid == 0 else 1 if st.st_gid in {os.getegid(), *os.getgroups()} else 2
        bits = {"r": (stat.S_IRUSR, stat.S_IRGRP, stat.S_IROTH), "x": (stat.S_IXUSR, stat.S_IXGRP, stat.S_IXOTH)}
        return all(st.st_mode & bits[c][who] for c in what)


class StoreError(TorchcodeError):
    """The progress store cannot be used (read-only, locked, ...)."""


class GraderError(TorchcodeError):
    """The grader itself could not run (a worker that could not start or died before loading the
    submission: device initialisation, confinement set-up, out of file descriptors, a lost helper
    process). Never a verdict on the learner's code, and never recorded as an attempt."""

    def __init__(self, cause: str):
        super().__init__(f"torchcode could not run your code: {cause}. This is a problem with the grader or "
                         "this machine, not with your code; nothing was recorded.")
        self.cause = cause

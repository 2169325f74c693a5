"""Removing a worker's temporary folder, whatever it left there (no torch: `check` removes its folder with it)."""

from __future__ import annotations

import os

# The prefix of every temporary folder whose path the learner's code can see (its working directory, the folder a
# class's files are unpacked to): tempfile's own, so that no path names the grader (docs/grading.md, "What a
# submission can tell")
SCRATCH = "tmp"
# `check`'s own temporary folder, set before its zygote is forked (which inherits it): the zygote removes it, once
# empty, where `check` died before it could. (By name it cannot be told from any other: a TMPDIR named tmp... .)
CHECK_FOLDER: list[str] = []

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW


def remove_tree(top) -> None:
    """Remove the folder ``top`` and everything under it, whatever a worker left there: like
    ``shutil.rmtree(top, ignore_errors=True)``, but never recursing (shutil's does once per level: a worker's
    1100 nested folders raised RecursionError, a traceback, and the folder stayed) and never holding more than
    one folder open (however deep, and whatever length of path). Links are removed, never followed."""
    try:
        here = os.open(top, _DIR)
    except OSError:
        return
    names: list[str] = []  # the way down from ``top``: the folder open now is names[-1] inside its parent
    stuck: set[tuple[int, int]] = set()  # folders that could not be emptied: left, never entered again
    try:
        while True:
            sub = _empty_files(here, stuck)
            if sub is not None:  # go down into the first subfolder
                try:
                    os.chmod(sub, 0o700, dir_fd=here, follow_symlinks=False)  # a worker may have taken its rights
                except OSError:
                    pass
                try:
                    down = os.open(sub, _DIR, dir_fd=here)
                except OSError:
                    stuck.add(_key(here, sub))
                    continue
                os.close(here)
                here, names = down, names + [sub]
                continue
            if not names:  # back at the top, everything under it done
                break
            up = os.open("..", _DIR, dir_fd=here)  # nothing moves it meanwhile: its worker has ended
            os.close(here)
            here, name = up, names.pop()
            try:
                os.rmdir(name, dir_fd=here)
            except OSError:
                stuck.add(_key(here, name))
    except OSError:
        pass
    finally:
        os.close(here)
    try:
        os.rmdir(top)
    except OSError:
        pass


def _empty_files(fd: int, stuck: set) -> str | None:
    """Unlink every entry of the folder ``fd`` but its subfolders; the name of one subfolder left to do, or None."""
    sub = None
    with os.scandir(fd) as it:
        for e in it:
            try:
                if e.is_dir(follow_symlinks=False):
                    if sub is None and _key(fd, e.name) not in stuck:
                        sub = e.name
                else:
                    os.unlink(e.name, dir_fd=fd)
            except OSError:
                pass
    return sub


def _key(fd: int, name: str) -> tuple[int, int]:
    try:
        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
        return st.st_dev, st.st_ino
    except OSError:
        return -1, hash(name)

"""`torchcode grade`: grade a whole class (see torchcode.classroom)."""

from __future__ import annotations

from pathlib import Path

from torchcode.commands.common import catalog, check_limits


def run(opts) -> int:
    from torchcode.classroom.run import run as grade_class
    from torchcode.render import console

    check_limits(opts.limits)
    return grade_class(opts, catalog(opts.problems_dirs), console())

"""`torchcode check`: grade a file, show the verdict, record the attempt."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from torchcode.catalog.spec import DTYPES
from torchcode.commands.common import catalog, display_path, resolve_target, store, warn_store
from torchcode.errors import StoreError, UsageError
from torchcode.progress import SEED_MAX, SEED_MIN
from torchcode.render import console, err_console


def run(target: str | None, problem: str | None, seed: int | None, as_json: bool, limits,
        problems_dirs: list[Path] | None, dtypes: list[str] | None = None) -> int:
    if seed is not None and not SEED_MIN <= seed <= SEED_MAX:
        raise UsageError(f"--seed must be a whole number from {SEED_MIN} to {SEED_MAX} "
                         f"(the seed a check prints), not {seed}")
    cat = catalog(problems_dirs)
    st = store()
    spec, path = resolve_target(cat, st, target, problem)
    from torchcode.grader.judge import Grader, resolve_device  # the only command that imports torch

    try:
        with Grader(limits) as grader:  # forks the zygote before anything touches CUDA
            limits.device = resolve_device(limits.device)
            report = grader.grade(spec, path, seed=seed, dtypes=_dtypes(spec, dtypes))
    except KeyboardInterrupt:
        err_console().print("interrupted: the check was stopped and nothing was recorded", markup=False)
        return 130
    try:
        st.record_attempt(problem=spec.id, verdict=report.verdict.value, passed=report.cases_passed,
                          total=len(report.cases), seconds=report.seconds,
                          kernel_seconds=sum(c.seconds for c in report.cases), sha256=report.sha256,
                          file=str(path), seed=report.seed)
    except StoreError as e:
        err_console().print(f"warning: progress not saved: {e}", markup=False, highlight=False)
    warn_store(st)
    if as_json:
        sys.stdout.write(json.dumps(report.to_dict(), indent=2) + "\n")
    else:
        from torchcode.render.report import report as render

        render(console(), report, display_file=display_path(path))
    return 0 if report.passed else 1


def _dtypes(spec, asked: list[str] | None) -> list[str] | None:
    if not asked:
        return None  # the default for the device
    if asked == ["all"]:
        return list(spec.grading.dtypes)
    unknown = [d for d in asked if d not in DTYPES]
    if unknown:
        raise UsageError(f"--dtype must be one of {', '.join(DTYPES)} or all, not {', '.join(unknown)}")
    undeclared = [d for d in asked if d not in spec.grading.dtypes]
    if undeclared:
        raise UsageError(f"{spec.id} is not graded in {', '.join(undeclared)}; it declares {', '.join(spec.grading.dtypes)}")
    return asked

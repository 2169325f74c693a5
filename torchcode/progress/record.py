"""Recording a graded attempt: one function every front end calls (check, watch, Jupyter, serve)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Callable

from torchcode.grader.result import Report
from torchcode.progress import Store, stored_text

MAX_SOURCE = 1 << 20  # a source larger than this (1 MiB) is not kept: it is not a kernel someone typed


def record_report(store: Store, report: Report, path: Path | str | None, *, source: bytes | None = None,
                  before_commit: Callable[[], None] | None = None) -> None:
    """Record ``report`` as one attempt, with the source it graded (for `torchcode history`).

    ``path``: the learner's file (None when the code came from a notebook cell or an editor buffer that
    is not on disk). ``source``: the graded text, when known; by default the file at ``path`` is read
    now, and kept only if it still matches the report's sha256 (it may have been saved again since the
    check read it). ``before_commit`` may still call the record off by raising (then nothing is
    recorded). Raises ``StoreError`` when the store cannot be written."""
    if source is None and path is not None:
        source = _read_graded(Path(path), report.sha256)
    if source is not None and len(source) > MAX_SOURCE:
        source = None
    store.record_attempt(problem=report.problem, verdict=report.verdict.value, passed=report.cases_passed,
                         total=len(report.cases), seconds=report.seconds,
                         kernel_seconds=sum(c.seconds for c in report.cases), sha256=report.sha256,
                         file=stored_text(path) if path is not None else "", seed=report.seed, source=source,
                         before_commit=before_commit)


def _read_graded(path: Path, sha256: str) -> bytes | None:
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if sha256 and hashlib.sha256(data).hexdigest() != sha256:
        return None
    return data

"""Recording a graded attempt: one function every front end calls (check, watch, Jupyter, serve)."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from torchcode.grader.result import Report
from torchcode.progress import Store


def record_report(store: Store, report: Report, path: Path | str | None, *, source: bytes | None = None,
                  before_commit: Callable[[], None] | None = None) -> None:
    """Record ``report`` as one attempt. ``path``: the learner's file (None when the code came from a
    notebook cell or an editor buffer that is not on disk). ``source``: the graded text, when known.
    ``before_commit`` may still call the record off by raising (then nothing is recorded).
    Raises ``StoreError`` when the store cannot be written."""
    store.record_attempt(problem=report.problem, verdict=report.verdict.value, passed=report.cases_passed,
                         total=len(report.cases), seconds=report.seconds,
                         kernel_seconds=sum(c.seconds for c in report.cases), sha256=report.sha256,
                         file=str(path) if path is not None else "", seed=report.seed, before_commit=before_commit)

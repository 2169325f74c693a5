"""Hostile and broken submissions: each gets the right verdict, and the grader stays healthy."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from conftest import expected_verdict
from torchcode.grader.judge import Limits

HOSTILE = sorted((Path(__file__).parent / "hostile").glob("*.py"))


@pytest.mark.parametrize("path", HOSTILE, ids=[p.stem for p in HOSTILE])
def test_hostile_submission(grader, catalog, path):
    old = grader.limits
    grader.limits = Limits(time_limit=1.0)
    try:
        start = time.monotonic()
        report = grader.grade(catalog.get("sdpa"), path)
    finally:
        grader.limits = old
    assert report.verdict.value == expected_verdict(path), (report.verdict, report.message)
    assert time.monotonic() - start < 30
    assert "{exit}" not in report.message


def test_time_limit_names_the_limit(grader, catalog):
    grader.limits = Limits(time_limit=0.5)
    try:
        report = grader.grade(catalog.get("sdpa"), Path(__file__).parent / "hostile" / "infinite_loop.py")
    finally:
        grader.limits = Limits()
    assert "0.5 s" in report.message
    assert [c.verdict.value for c in report.cases][1:] == ["not_run"] * (len(report.cases) - 1)


def test_crash_says_how_the_process_ended(grader, catalog):
    report = grader.grade(catalog.get("sdpa"), Path(__file__).parent / "hostile" / "segfault.py")
    assert "SIGSEGV" in report.message


def test_syntax_error_points_at_the_line(grader, catalog):
    report = grader.grade(catalog.get("sdpa"), Path(__file__).parent / "hostile" / "syntax_error.py")
    assert "syntax_error.py:2" in report.message
    assert "^" in report.cases[0].traceback


def test_learner_output_is_captured_not_printed(grader, catalog, capfd):
    report = grader.grade(catalog.get("sdpa"), Path(__file__).parent / "hostile" / "prints_a_lot.py")
    out, err = capfd.readouterr()
    assert "xxxx" not in out and "xxxx" not in err
    assert report.output.startswith("xxxx") and "truncated" in report.output


def test_no_orphan_processes_after_checks(grader, catalog):
    for name in ("infinite_loop.py", "os_exit_in_call.py", "segfault.py"):
        grader.limits = Limits(time_limit=0.5)
        grader.grade(catalog.get("sdpa"), Path(__file__).parent / "hostile" / name)
    grader.limits = Limits()
    time.sleep(0.2)
    children = _children(os.getpid())
    assert children == [grader.zygote.pid], children  # only the zygote, no worker left behind


def _children(pid: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            state = stat.rsplit(")", 1)[1].split()[0]
            if ppid == pid and state != "Z":
                out.append(int(d.name))
    grandchildren = [c for child in out for c in _children(child)]
    return out + grandchildren

"""Ctrl-C during `torchcode check`: one outcome wherever it lands.

The outcome: the "interrupted" message on stderr, exit 130, nothing on stdout, nothing recorded,
no process left (worker, zygote), no temporary directory left. SIGINT goes to a real `torchcode
check` subprocess: at delays into a slow submission's import and cases, twice in a row, and at
phases reached through a driver that runs the real CLI entry point with one function made to
pause (so the signal lands exactly there: loading the catalog, preparing the reference,
recording, rendering).
"""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from conftest import ROOT
from conftest import alive as _alive, family as _family

MESSAGE = "interrupted: the check was stopped and nothing was recorded\n"

SLOW_IMPORT = textwrap.dedent("""
    import time
    time.sleep(20)  # still importing when Ctrl-C comes
    from math import sqrt
    import torch
    def scaled_dot_product_attention(Q, K, V, mask=None):
        s = Q @ K.transpose(-2, -1) / sqrt(Q.size(-1))
        if mask is not None:
            s = s.masked_fill(~mask, float("-inf"))
        return torch.softmax(s, dim=-1) @ V
""")
SLOW_CASES = SLOW_IMPORT.replace("time.sleep(20)  # still importing when Ctrl-C comes", "").replace(
    "    s = Q @", "    time.sleep(0.4)  # each call is slow\n    s = Q @")
assert SLOW_CASES.count("time.sleep(0.4)") == 1

DRIVER = textwrap.dedent("""
    import importlib, sys, time
    phase, marker = sys.argv[1], sys.argv[2]
    module, owner, name, pause = {
        "catalog": ("torchcode.commands.check", None, "catalog", 20),
        "prepare": ("torchcode.grader.problem", "Problem", "prepare", 20),
        "record": ("torchcode.progress", "Store", "record_attempt", 2),  # deferred: it runs to its end
        "render": ("torchcode.render.report", None, "report", 20),
        "recorded": ("torchcode.commands.check", None, "warn_store", 2),  # after the point of no return
    }[phase]
    target = importlib.import_module(module)
    target = getattr(target, owner) if owner else target
    original = getattr(target, name)
    def paused(*args, **kwargs):
        open(marker, "w").close()
        time.sleep(pause)
        return original(*args, **kwargs)
    setattr(target, name, paused)
    sys.argv = ["torchcode", *sys.argv[3:]]
    from torchcode.cli import main
    main()
""")


def _interrupt(cmd: list[str], cwd: Path, env: dict, ready, delays: list[float]):
    """Start ``cmd``; once ``ready(pid, family)`` is true, send SIGINT after each of ``delays``."""
    p = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         stdin=subprocess.DEVNULL, text=True)
    seen: set[int] = set()
    deadline = time.monotonic() + 60
    while not ready(seen) and p.poll() is None and time.monotonic() < deadline:
        seen |= _family(p.pid)
        time.sleep(0.02)
    assert p.poll() is None, ("the check ended before it could be interrupted", p.communicate())
    for delay in delays:
        end = time.monotonic() + delay
        while time.monotonic() < end:
            seen |= _family(p.pid)
            time.sleep(0.01)
        p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    return p.returncode, out, err, seen


@pytest.fixture
def setting(workdir, tmp_path, torchcode_home):
    tmp = tmp_path / "tmpdir"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp), "NO_COLOR": "1"}
    return workdir, env, tmp, torchcode_home


def _assert_one_outcome(result, tmp: Path, home: Path):
    code, out, err, seen = result
    assert (code, out, err) == (130, "", MESSAGE), (code, out, err)
    assert seen, "no zygote or worker was ever seen"
    time.sleep(0.3)
    assert [pid for pid in seen if _alive(pid)] == []
    assert list(tmp.iterdir()) == []
    db = home / "progress.sqlite3"
    assert not db.exists() or sqlite3.connect(db).execute("SELECT count(*) FROM attempts").fetchone() == (0,)


def _torchcode() -> list[str]:
    exe = shutil.which("torchcode")
    return [exe] if exe else [sys.executable, "-m", "torchcode"]


def _worker_running(seen: set[int]) -> bool:
    return len(seen) >= 2  # the zygote and a worker


@pytest.mark.parametrize("delays", [[0.0], [0.5], [0.1, 0.05]], ids=["at-once", "later", "twice"])
def test_ctrl_c_while_the_file_loads(setting, delays):
    workdir, env, tmp, home = setting
    (workdir / "sdpa.py").write_text(SLOW_IMPORT)
    result = _interrupt(_torchcode() + ["check", "sdpa.py", "--device", "cpu"], workdir, env, _worker_running, delays)
    _assert_one_outcome(result, tmp, home)


@pytest.mark.parametrize("delays", [[1.0], [1.9], [1.2, 0.02]], ids=["early", "late", "twice"])
def test_ctrl_c_during_the_cases(setting, delays):
    workdir, env, tmp, home = setting
    (workdir / "sdpa.py").write_text(SLOW_CASES)
    result = _interrupt(_torchcode() + ["check", "sdpa.py", "--device", "cpu"], workdir, env, _worker_running, delays)
    _assert_one_outcome(result, tmp, home)


@pytest.mark.parametrize("phase", ["catalog", "prepare", "record", "render"])
def test_ctrl_c_at_each_phase(setting, phase):
    workdir, env, tmp, home = setting
    shutil.copy(ROOT / "solutions" / "sdpa.py", workdir / "sdpa.py")
    driver = tmp.parent / "driver.py"
    driver.write_text(DRIVER)
    marker = tmp.parent / "reached"
    cmd = [sys.executable, str(driver), phase, str(marker), "check", "sdpa.py", "--device", "cpu"]
    code, out, err, seen = _interrupt(cmd, workdir, env, lambda seen: marker.exists(), [0.2])
    assert (code, out, err) == (130, "", MESSAGE), (code, out, err)
    time.sleep(0.3)
    assert [pid for pid in seen if _alive(pid)] == []
    assert list(tmp.iterdir()) == []
    db = home / "progress.sqlite3"
    assert not db.exists() or sqlite3.connect(db).execute("SELECT count(*) FROM attempts").fetchone() == (0,)


def test_ctrl_c_once_the_attempt_is_recorded_changes_nothing(setting):
    """The point of no return is the record: a Ctrl-C after it leaves the check's own outcome."""
    workdir, env, tmp, home = setting
    shutil.copy(ROOT / "solutions" / "sdpa.py", workdir / "sdpa.py")
    driver = tmp.parent / "driver.py"
    driver.write_text(DRIVER)
    marker = tmp.parent / "reached"
    cmd = [sys.executable, str(driver), "recorded", str(marker), "check", "sdpa.py", "--device", "cpu"]
    code, out, err, seen = _interrupt(cmd, workdir, env, lambda seen: marker.exists(), [0.2, 0.2])
    assert code == 0 and out.startswith("Accepted") and err == "", (code, out, err)
    assert sqlite3.connect(home / "progress.sqlite3").execute("SELECT verdict FROM attempts").fetchall() == [("accepted",)]
    assert list(tmp.iterdir()) == []


def test_without_ctrl_c_the_driver_records(setting):
    """The control for the phase test: the same driver, not interrupted, grades and records."""
    workdir, env, tmp, home = setting
    shutil.copy(ROOT / "solutions" / "sdpa.py", workdir / "sdpa.py")
    driver = tmp.parent / "driver.py"
    driver.write_text(DRIVER.replace('"record": ("torchcode.progress", "Store", "record_attempt", 2)',
                                     '"record": ("torchcode.progress", "Store", "record_attempt", 0)'))
    p = subprocess.run([sys.executable, str(driver), "record", str(tmp.parent / "reached"), "check", "sdpa.py",
                        "--device", "cpu"], cwd=workdir, env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and p.stdout.startswith("Accepted"), p.stdout + p.stderr
    assert sqlite3.connect(home / "progress.sqlite3").execute("SELECT verdict FROM attempts").fetchall() == [("accepted",)]
    assert list(tmp.iterdir()) == []

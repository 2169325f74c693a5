"""The progress store on real SQLite files: concurrency, kills, corruption, read-only homes."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap

import pytest

from torchcode.errors import StoreError
from torchcode.progress import Store

WRITER = textwrap.dedent("""
    import sys
    from torchcode.progress import Store
    s = Store()
    for i in range(int(sys.argv[2])):
        s.record_attempt(problem=sys.argv[1], verdict="wrong_answer", passed=i, total=9, seconds=0.1,
                         kernel_seconds=0.01, sha256="x" * 64, file="f.py", seed=i)
""")


def _attempt(store: Store, problem="sdpa", verdict="accepted"):
    store.record_attempt(problem=problem, verdict=verdict, passed=3, total=3, seconds=1.0, kernel_seconds=0.02,
                         sha256="0" * 64, file="x.py", seed=1)


def test_records_and_summarises(torchcode_home):
    s = Store()
    _attempt(s, verdict="wrong_answer")
    _attempt(s)
    p = s.progress()["sdpa"]
    assert (p.attempts, p.solved, p.status, p.last_verdict) == (2, True, "solved", "accepted")
    assert (torchcode_home / "progress.sqlite3").is_file()


def test_twenty_concurrent_writers_lose_nothing(torchcode_home):
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, f"p{i}", "10"]) for i in range(20)]
    assert [p.wait(timeout=120) for p in procs] == [0] * 20
    rows = Store().attempts()
    assert len(rows) == 200
    assert {r["problem"] for r in rows} == {f"p{i}" for i in range(20)}
    con = sqlite3.connect(torchcode_home / "progress.sqlite3")
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_a_store_told_locked_at_once_while_it_opens_waits_and_records(torchcode_home, monkeypatch):
    """SQLite answers "database is locked" at once, whatever its busy timeout, where waiting could deadlock: one of
    the twenty writers above, opening a new store with the others, was told so on CI, and its records were lost.
    Opening is tried again, up to the busy timeout."""
    real, told = Store._open, []

    def locked_at_first(self):
        if len(told) < 3:
            told.append(self.path)
            raise sqlite3.OperationalError("database is locked")
        return real(self)

    monkeypatch.setattr(Store, "_open", locked_at_first)
    _attempt(Store())
    assert len(told) == 3 and [r["problem"] for r in Store().attempts()] == ["sdpa"]


def test_sigkill_mid_writes_leaves_a_usable_store(torchcode_home):
    p = subprocess.Popen([sys.executable, "-c", WRITER, "killed", "100000"])
    import time

    deadline = time.time() + 30
    while time.time() < deadline and not Store().attempts("killed"):
        time.sleep(0.05)
    p.send_signal(signal.SIGKILL)
    p.wait()
    s = Store()
    n = len(s.attempts("killed"))
    assert n > 0
    _attempt(s)
    assert len(s.attempts()) == n + 1


def test_corrupt_store_is_moved_aside_not_overwritten(torchcode_home):
    torchcode_home.mkdir(parents=True)
    db = torchcode_home / "progress.sqlite3"
    garbage = b"this is not a database" * 100
    db.write_bytes(garbage)
    s = Store()
    _attempt(s)
    assert len(s.attempts()) == 1
    assert any("corrupt" in w for w in s.warnings)
    aside = [p for p in torchcode_home.iterdir() if ".corrupt-" in p.name]
    assert len(aside) == 1 and aside[0].read_bytes() == garbage


def test_truncated_store_is_detected(torchcode_home):
    s = Store()
    for _ in range(50):
        _attempt(s)
    s.close()
    db = torchcode_home / "progress.sqlite3"
    data = db.read_bytes()
    db.write_bytes(data[: len(data) // 2 + 100])
    s = Store()
    _attempt(s)  # works again, on a fresh file
    assert any(".corrupt-" in p.name for p in torchcode_home.iterdir())


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores directory permissions")
def test_read_only_home_is_a_clear_error(torchcode_home):
    torchcode_home.mkdir(parents=True)
    torchcode_home.chmod(0o500)
    try:
        with pytest.raises(StoreError, match="TORCHCODE_HOME"):
            _attempt(Store())
    finally:
        torchcode_home.chmod(0o700)


def test_unwritable_home_still_grades(cli, workdir, tmp_path):
    """A check whose progress cannot be saved still gives its verdict (and says so)."""
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the data directory should be")
    import shutil

    from conftest import ROOT

    shutil.copy(ROOT / "solutions" / "sdpa.py", workdir / "sdpa.py")
    r = cli("check", "sdpa.py", env={"TORCHCODE_HOME": str(blocker / "home")})
    assert r.code == 0, r.text
    assert "progress not saved" in r.err


def test_hints_and_started(torchcode_home, tmp_path):
    s = Store()
    assert s.hints_revealed("gqa") == 0
    assert [s.reveal_hint("gqa", 3) for _ in range(4)] == [1, 2, 3, 3]
    s.mark_started(tmp_path, "gqa", tmp_path / "gqa.py")
    s.mark_started(tmp_path, "mha", tmp_path / "mha.py")
    assert s.last_started(tmp_path) == ("mha", str(tmp_path / "mha.py"))
    assert s.started_file(tmp_path, "gqa") == str(tmp_path / "gqa.py")


def test_a_path_that_is_not_utf8_is_recorded_and_given_back_unchanged(torchcode_home):
    """A folder or file name with a byte that is not UTF-8 (read as a lone surrogate) crashed every write:
    the attempt is recorded (its file shown escaped), and the started file comes back as the same path."""
    from pathlib import Path

    folder, file = Path("/tmp/d\udce9"), Path("/tmp/d\udce9/bad\udcff\x1b[2Jname.py")
    s = Store()
    s.record_attempt(problem="sdpa", verdict="accepted", passed=3, total=3, seconds=1.0, kernel_seconds=0.02,
                     sha256="0" * 64, file=str(file), seed=1)
    assert s.attempts("sdpa")[0]["file"] == "/tmp/d\\xe9/bad\\xff\x1b[2Jname.py"
    s.mark_started(folder, "sdpa", file)
    s.mark_started(Path("/tmp/d\u00e9"), "sdpa", Path("/tmp/d\u00e9/sdpa.py"))  # the UTF-8 é: another folder
    assert s.started_file(folder, "sdpa") == str(file) and s.last_started(folder) == ("sdpa", str(file))
    assert s.started_file(Path("/tmp/d\u00e9"), "sdpa") == "/tmp/d\u00e9/sdpa.py"

"""Environments a new user may well have: a read-only progress store, a read-only folder, odd seeds.

Read-only tests must mean it when the tests run as root (root ignores file permissions): the
CLI then runs without CAP_DAC_OVERRIDE / CAP_DAC_READ_SEARCH / CAP_FOWNER, so chmod binds it
like any user; where that cannot be arranged the test is skipped, saying why.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import sqlite3
import stat
import subprocess
from pathlib import Path

import pytest

from conftest import ROOT, run_cli

HOSTILE = Path(__file__).parent / "hostile"
PR_CAPBSET_DROP = 24
CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER = 1, 2, 3


def _as_a_user() -> None:
    """preexec: as root, give up what lets root ignore file permissions (for the exec'd CLI)."""
    if os.geteuid() != 0:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER):
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


@pytest.fixture
def read_only(tmp_path):
    """``read_only(path)`` takes write permission away from a folder (and what is in it) or a file,
    after checking that a CLI subprocess is really refused there; given back at teardown."""
    done: list[Path] = []

    def make(path: Path) -> None:
        for p in [path, *path.rglob("*")] if path.is_dir() else [path]:
            p.chmod(p.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
            done.append(p)
        write = f": > '{path / '.probe'}'" if path.is_dir() else f": >> '{path}'"
        try:
            r = subprocess.run(["sh", "-c", write], capture_output=True, preexec_fn=_as_a_user)
        except (OSError, subprocess.SubprocessError) as e:
            pytest.skip(f"cannot run a process bound by file permissions here ({e})")
        if r.returncode == 0:
            pytest.skip("file permissions do not bind processes here (root with all capabilities)")

    yield make
    for p in reversed(done):
        p.chmod(p.stat().st_mode | stat.S_IWUSR)


def _rows(home: Path, sql: str) -> list[tuple]:
    con = sqlite3.connect(f"{(home / 'progress.sqlite3').as_uri()}?mode=ro", uri=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


@pytest.fixture(scope="module")
def history_made(tmp_path_factory):
    """A store with one accepted sdpa check and one revealed hint, made through the CLI once per module."""
    base = tmp_path_factory.mktemp("history")
    work, home = base / "work", base / "home"
    work.mkdir()
    env = {"TORCHCODE_HOME": str(home), "TORCHCODE_PROBLEMS": None}
    assert run_cli("start", "sdpa", cwd=work, env=env).code == 0
    shutil.copy(ROOT / "solutions" / "sdpa.py", work / "sdpa.py")
    assert run_cli("check", "--device", "cpu", cwd=work, env=env).code == 0
    assert run_cli("hint", "sdpa", cwd=work, env=env).code == 0
    shutil.rmtree(home / "cache", ignore_errors=True)  # the cache is not required either
    return home


@pytest.fixture
def history(cli, workdir, torchcode_home, history_made):
    """That store, copied for this test, with sdpa started (through the CLI) in this test's folder and the
    accepted file in it."""
    shutil.copytree(history_made, torchcode_home)
    assert cli("start", "sdpa").code == 0
    shutil.copy(ROOT / "solutions" / "sdpa.py", workdir / "sdpa.py")
    shutil.rmtree(torchcode_home / "cache", ignore_errors=True)
    return torchcode_home


@pytest.mark.parametrize("what", ["folder", "folder, checkpointed", "file"])
def test_read_only_store_is_read_and_checks_still_grade(cli, workdir, history, read_only, what):
    before = (_rows(history, "SELECT * FROM attempts"), _rows(history, "SELECT * FROM hints"))
    if what == "folder, checkpointed":  # no -wal/-shm beside it: only an immutable open can read it
        con = sqlite3.connect(history / "progress.sqlite3")
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        con.close()  # the last connection to close removes them
        assert sorted(p.name for p in history.iterdir()) == ["progress.sqlite3"]
    files = sorted(p.name for p in history.iterdir())
    read_only(history if what.startswith("folder") else history / "progress.sqlite3")

    def run(*args):
        r = cli(*args, preexec_fn=_as_a_user)
        assert "Traceback" not in r.err, r.err
        return r

    r = run("list")
    assert r.code == 0 and "1 solved" in r.out, r.text
    r = run("status")
    assert r.code == 0 and "solved" in r.out and "1 solved" in r.out, r.text
    r = run("show", "sdpa")
    assert r.code == 0 and "Hints: 1 of 3 revealed" in r.out, r.text
    r = run("hint", "sdpa", "--all")
    assert r.code == 0 and "Hint 1 of 3" in r.out, r.text
    r = run("hint", "sdpa")
    assert r.code == 0 and "Hint 2 of 3" in r.out, r.text
    assert "hint 2 is shown but could not be recorded" in r.err and "TORCHCODE_HOME" in r.err
    r = run("check", "--device", "cpu")  # the file `start` recorded for this folder, read from the store
    assert r.code == 0 and r.out.startswith("Accepted"), r.text
    assert "progress not saved" in r.err
    shutil.copy(HOSTILE / "returns_zeros.py", workdir / "zeros.py")
    r = run("check", "zeros.py", "--problem", "sdpa", "--device", "cpu")
    assert r.code == 1 and r.out.startswith("Wrong answer") and "progress not saved" in r.err, r.text
    r = run("start", "mha")
    assert r.code == 0 and (workdir / "mha.py").is_file(), r.text
    if what.startswith("folder"):
        assert sorted(p.name for p in history.iterdir()) == files  # no cache made, nothing written
    assert (_rows(history, "SELECT * FROM attempts"), _rows(history, "SELECT * FROM hints")) == before


def test_read_only_mount(cli, workdir, history):
    """A read-only mount (EROFS, not EACCES): SQLite cannot even open the file read-write."""
    if shutil.which("unshare") is None or os.geteuid() != 0:
        pytest.skip("needs root and unshare(1) to make a private read-only bind mount")
    probe = subprocess.run(["unshare", "-m", "sh", "-c", f"mount --bind -o ro '{history}' '{history}' && "
                            f"! touch '{history}/x' 2>/dev/null"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot make a read-only bind mount here: {probe.stderr.decode().strip()}")
    exe = shutil.which("torchcode")
    for args, code, out in [("list", 0, "1 solved"), ("check --device cpu", 0, "Accepted"), ("hint sdpa", 0, "Hint 2 of 3")]:
        p = subprocess.run(["unshare", "-m", "sh", "-c", f"mount --bind -o ro '{history}' '{history}' && {exe} {args}"],
                           cwd=workdir, capture_output=True, text=True, timeout=120, env={**os.environ, "NO_COLOR": "1"})
        assert p.returncode == code and out in p.stdout, (args, p.stdout, p.stderr)
        assert "Traceback" not in p.stderr
    assert len(_rows(history, "SELECT * FROM attempts")) == 1


def test_unwritable_home_that_does_not_exist_yet(cli, workdir, tmp_path, read_only):
    parent = tmp_path / "locked"
    parent.mkdir()
    read_only(parent)
    env = {"TORCHCODE_HOME": str(parent / "home")}
    shutil.copy(ROOT / "solutions" / "sdpa.py", workdir / "sdpa.py")
    for args, code in [(["list"], 0), (["status"], 0), (["show", "sdpa"], 0), (["hint", "sdpa"], 0),
                       (["check", "sdpa.py", "--device", "cpu"], 0), (["start", "mha"], 0)]:
        r = cli(*args, env=env, preexec_fn=_as_a_user)
        assert r.code == code and "Traceback" not in r.err, (args, r.text)
    assert not (parent / "home").exists()


def test_reset_in_a_read_only_folder_loses_nothing(cli, workdir, read_only):
    assert cli("start", "sdpa").code == 0
    mine = (workdir / "sdpa.py").read_text() + "# my work\n"
    (workdir / "sdpa.py").write_text(mine)
    read_only(workdir)
    r = cli("reset", "sdpa", preexec_fn=_as_a_user)
    assert r.code == 2, r.text
    assert r.err.startswith("error: cannot keep a backup of") and "Traceback" not in r.err
    assert len(r.err.strip().splitlines()) == 1
    assert (workdir / "sdpa.py").read_text() == mine
    assert sorted(p.name for p in workdir.iterdir()) == ["sdpa.py"]


def test_reset_of_a_linked_file_replaces_the_link_never_its_target(cli, workdir, tmp_path):
    """sdpa.py is a symlink (a starter repo can ship one pointing anywhere: ~/.bashrc): reset (and serve's Convert to
    UTF-8, the same write) puts the stub in place of the link, keeps the content as a backup, and leaves the target
    as it was (it wrote the stub through the link, into the target); the backup is the link. The stub goes to a new file first, of a name
    no one chose: a fixed one (.sdpa.py.torchcode-stub) could be a second link shipped beside it (the stub went
    through that one)."""
    assert cli("start", "sdpa").code == 0
    target, other = tmp_path / "elsewhere" / "bashrc", tmp_path / "elsewhere" / "profile"
    target.parent.mkdir()
    target.write_text("export PATH=$HOME/bin:$PATH\n")
    other.write_text("export B=2\n")
    (workdir / "sdpa.py").unlink()
    (workdir / "sdpa.py").symlink_to(target)
    (workdir / ".sdpa.py.torchcode-stub").symlink_to(other)
    r = cli("reset", "sdpa")
    assert r.code == 0, r.text
    assert target.read_text() == "export PATH=$HOME/bin:$PATH\n" and other.read_text() == "export B=2\n"
    assert not (workdir / "sdpa.py").is_symlink() and "def scaled_dot_product_attention" in (workdir / "sdpa.py").read_text()
    assert (workdir / "sdpa.py").stat().st_mode & 0o777 == 0o666 & ~_umask()  # as a file written in place
    backups = [p for p in workdir.iterdir() if ".bak-" in p.name]  # the link itself: the target's content (any
    # file of the learner's) is not copied into a folder they may commit and push
    assert len(backups) == 1 and backups[0].is_symlink() and backups[0].resolve() == target.resolve()
    assert sorted(p.name for p in workdir.iterdir() if p.name.startswith(".")) == [".sdpa.py.torchcode-stub"]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_reset_of_a_read_only_file_keeps_a_copy(cli, workdir, read_only):
    assert cli("start", "sdpa").code == 0
    mine = (workdir / "sdpa.py").read_text() + "# my work\n"
    (workdir / "sdpa.py").write_text(mine)
    read_only(workdir / "sdpa.py")
    r = cli("reset", "sdpa", preexec_fn=_as_a_user)
    assert r.code == 2 and "Traceback" not in r.err, r.text
    assert "cannot write" in r.err and "a copy of your file is at" in r.err
    assert (workdir / "sdpa.py").read_text() == mine
    backups = [p for p in workdir.iterdir() if ".bak-" in p.name]
    assert len(backups) == 1 and backups[0].read_text() == mine


@pytest.mark.parametrize("seed", [str(2**63), "-1", str(10**30)])
def test_out_of_range_seed_is_refused_before_grading(cli, workdir, torchcode_home, seed):
    shutil.copy(ROOT / "solutions" / "sdpa.py", workdir / "sdpa.py")
    r = cli("check", "sdpa.py", "--device", "cpu", "--seed", seed)
    assert r.code == 2 and r.out == "", r.text
    assert r.err.startswith(f"error: --seed must be a whole number from 0 to {2**63 - 1}") and "Traceback" not in r.err
    assert not (torchcode_home / "progress.sqlite3").exists()  # nothing graded, nothing recorded


def test_largest_seed_grades_and_is_recorded(cli, workdir, torchcode_home):
    shutil.copy(ROOT / "solutions" / "sdpa.py", workdir / "sdpa.py")
    r = cli("check", "sdpa.py", "--device", "cpu", "--seed", str(2**63 - 1))
    assert r.code == 0, r.text
    assert _rows(torchcode_home, "SELECT verdict, seed FROM attempts") == [("accepted", 2**63 - 1)]


def test_store_refuses_a_seed_it_cannot_hold(torchcode_home):
    from torchcode.errors import StoreError
    from torchcode.progress import Store

    s = Store()
    for seed in (2**63, -(2**63) - 1):
        with pytest.raises(StoreError, match="cannot be recorded"):
            s.record_attempt(problem="sdpa", verdict="accepted", passed=1, total=1, seconds=1.0, kernel_seconds=0.1,
                             sha256="0" * 64, file="x.py", seed=seed)
    s.record_attempt(problem="sdpa", verdict="accepted", passed=1, total=1, seconds=1.0, kernel_seconds=0.1,
                     sha256="0" * 64, file="x.py", seed=7)
    assert [a["seed"] for a in s.attempts()] == [7]


def test_a_commit_can_be_called_off(torchcode_home):
    from torchcode.progress import Store

    s = Store()

    def call_off():
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        s.record_attempt(problem="sdpa", verdict="accepted", passed=1, total=1, seconds=1.0, kernel_seconds=0.1,
                         sha256="0" * 64, file="x.py", seed=7, before_commit=call_off)
    assert s.attempts() == []
    s.record_attempt(problem="sdpa", verdict="accepted", passed=1, total=1, seconds=1.0, kernel_seconds=0.1,
                     sha256="0" * 64, file="x.py", seed=8)
    assert [a["seed"] for a in s.attempts()] == [8]

"""`torchcode history` and `reset --progress` through the real CLI, on real SQLite files; the schema
migration of a store written by an older torchcode (it keeps working and loses nothing)."""

from __future__ import annotations

import json
import re
import sqlite3
import time

from conftest import ROOT, on_a_terminal
from test_bad_environments import _as_a_user, read_only  # noqa: F401  (a fixture)

WRONG = (ROOT / "problems" / "sdpa" / "wrong" / "scale_by_dk.py").read_text()
RIGHT = (ROOT / "solutions" / "sdpa.py").read_text()

# The schema torchcode wrote before it kept sources (user_version 1), exactly as it was.
SCHEMA_V1 = """
CREATE TABLE IF NOT EXISTS attempts (
    id INTEGER PRIMARY KEY, problem TEXT NOT NULL, at REAL NOT NULL, verdict TEXT NOT NULL,
    passed INTEGER NOT NULL, total INTEGER NOT NULL, seconds REAL NOT NULL, kernel_seconds REAL NOT NULL,
    sha256 TEXT NOT NULL, file TEXT NOT NULL, seed INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS attempts_problem ON attempts(problem);
CREATE TABLE IF NOT EXISTS hints (problem TEXT PRIMARY KEY, revealed INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS started (
    directory TEXT NOT NULL, problem TEXT NOT NULL, file TEXT NOT NULL, at REAL NOT NULL,
    PRIMARY KEY (directory, problem)
);
"""


def _rows(home, sql):
    con = sqlite3.connect(f"{(home / 'progress.sqlite3').as_uri()}?mode=ro", uri=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def _old_store(home, workdir):
    """A version 1 store: two sdpa attempts, one gqa attempt, a revealed hint, a started file."""
    home.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(home / "progress.sqlite3", isolation_level=None)
    con.execute("PRAGMA journal_mode = WAL")
    con.executescript(SCHEMA_V1 + "PRAGMA user_version = 1;")
    now = time.time()
    rows = [("sdpa", now - 300, "wrong_answer", 2, 7, 0.5, 0.1, "a" * 64, "sdpa.py", 11),
            ("gqa", now - 200, "accepted", 6, 6, 0.4, 0.05, "b" * 64, "gqa.py", 22),
            ("sdpa", now - 100, "accepted", 7, 7, 0.6, 0.02, "c" * 64, "sdpa.py", 33)]
    con.executemany("INSERT INTO attempts (problem, at, verdict, passed, total, seconds, kernel_seconds, sha256, "
                    "file, seed) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
    con.execute("INSERT INTO hints VALUES ('sdpa', 2)")
    con.execute("INSERT INTO started VALUES (?, 'sdpa', ?, ?)", (str(workdir), str(workdir / "sdpa.py"), now))
    con.close()
    return rows


def test_history_lists_attempts_and_keeps_each_source(cli, workdir, torchcode_home):
    assert cli("start", "sdpa").code == 0
    (workdir / "sdpa.py").write_text(WRONG)
    first = cli("check")
    assert first.code == 1
    seed = first.out.split("seed ")[1].split(":")[0]
    (workdir / "sdpa.py").write_text(RIGHT)
    assert cli("check").code == 0

    r = cli("history", "sdpa")
    assert r.code == 0, r.text
    assert "sdpa: 2 attempts" in r.out
    lines = [line for line in r.out.splitlines() if line.strip()[:1] in ("1", "2")]
    assert "Wrong answer" in lines[0] and seed in lines[0], r.out
    passed, total = re.search(r" (\d+)/(\d+) ", lines[0]).groups()
    assert int(passed) < int(total)
    assert "Accepted" in lines[1] and f" {total}/{total} " in lines[1], r.out
    assert time.strftime("%Y-%m-%d") in lines[0]
    assert cli("history").out == r.out  # defaults to the problem started here
    listed = json.loads(cli("history", "sdpa", "--json").out)
    assert listed["problem"] == "sdpa" and [a["n"] for a in listed["attempts"]] == [1, 2]
    assert [a["verdict"] for a in listed["attempts"]] == ["wrong_answer", "accepted"]
    assert listed["attempts"][0]["seed"] == int(seed) and all(a["source_kept"] for a in listed["attempts"])

    r = cli("history", "sdpa", "--show", "1")
    assert r.code == 0 and r.out == WRONG, r.text  # byte for byte: `> sdpa.py` restores it
    assert cli("history", "sdpa", "--show", "2").out == RIGHT

    r = cli("history", "sdpa", "--diff", "1", "2")
    assert r.code == 0, r.text
    assert r.out.startswith("--- sdpa attempt 1 (wrong_answer") and "+++ sdpa attempt 2 (accepted" in r.out
    lines = r.out.splitlines()
    assert "-    scores = Q @ K.transpose(-2, -1) / Q.size(-1)" in lines  # the bug, removed
    assert "+    scores = Q @ K.transpose(-2, -1) / math.sqrt(d_k)  # (..., Lq, Lk)" in lines  # the fix, added
    assert " def scaled_dot_product_attention(Q, K, V, mask=None):" in lines  # unchanged context
    assert "same source" in cli("history", "sdpa", "--diff", "2", "2").out

    for args, words in [(("--show", "3"), "from 1 to 2"), (("--show", "0"), "from 1 to 2"),
                        (("--diff", "1", "9"), "no attempt 9"), (("--show", "1", "--diff", "1", "2"), "either")]:
        r = cli("history", "sdpa", *args)
        assert r.code == 2 and words in r.err and "Traceback" not in r.err, (args, r.text)
    r = cli("history", "mha")
    assert r.code == 0 and "No attempt of mha" in r.out
    assert cli("history", "mha", "--show", "1").code == 2


def test_source_changed_during_the_check_is_not_kept(cli, workdir, torchcode_home):
    """The source kept is the one graded: a file that no longer matches the report's hash is not kept."""
    from torchcode.grader.result import Report, Verdict
    from torchcode.progress import Store
    from torchcode.progress.record import record_report

    f = workdir / "sdpa.py"
    f.write_text(RIGHT)
    import hashlib

    graded = Report(problem="sdpa", file=str(f), verdict=Verdict.ACCEPTED, seed=5,
                    sha256=hashlib.sha256(RIGHT.encode()).hexdigest())
    record_report(Store(), graded, f)
    f.write_text(WRONG)  # saved again after the check read it
    record_report(Store(), graded, f)
    record_report(Store(), graded, None, source=b"def f(): pass\n")  # a notebook cell: given as bytes
    assert [r[0] for r in _rows(torchcode_home, "SELECT source FROM attempts ORDER BY id")] == [
        RIGHT.encode(), None, b"def f(): pass\n"]
    r = cli("history", "sdpa", "--show", "2")
    assert r.code == 2 and "was not kept" in r.err


def test_an_old_store_is_migrated_and_loses_nothing(cli, workdir, torchcode_home):
    old = _old_store(torchcode_home, workdir)
    r = cli("history", "sdpa")
    assert r.code == 0, r.text
    assert "sdpa: 2 attempts" in r.out and "without their source" in r.out
    assert _rows(torchcode_home, "PRAGMA user_version") == [(2,)]
    cols = "problem, at, verdict, passed, total, seconds, kernel_seconds, sha256, file, seed"
    assert _rows(torchcode_home, f"SELECT {cols} FROM attempts ORDER BY id") == old
    assert _rows(torchcode_home, "SELECT * FROM hints") == [("sdpa", 2)]
    assert _rows(torchcode_home, "SELECT problem, pack FROM started") == [("sdpa", None)]  # started.pack added
    r = cli("history", "sdpa", "--show", "1")
    assert r.code == 2 and "older torchcode" in r.err
    r = cli("status")
    assert r.code == 0 and "2 solved" in r.out
    assert "Hint 2 of 3" in cli("hint", "--all").out  # the started file still says which problem
    (workdir / "sdpa.py").write_text(RIGHT)
    assert cli("check").code == 0  # the started file from the old store
    assert cli("history", "sdpa", "--show", "3").out == RIGHT
    assert len(_rows(torchcode_home, "SELECT * FROM attempts")) == 4


def test_an_old_read_only_store_is_still_read(cli, workdir, torchcode_home, read_only):
    _old_store(torchcode_home, workdir)
    read_only(torchcode_home)

    def run(*args):
        r = cli(*args, preexec_fn=_as_a_user)
        assert "Traceback" not in r.err, r.err
        return r

    r = run("history", "sdpa")
    assert r.code == 0 and "sdpa: 2 attempts" in r.out, r.text
    assert run("status").out.count("solved") >= 2
    r = run("history", "sdpa", "--show", "2")
    assert r.code == 2 and "not kept" in r.err
    assert _rows(torchcode_home, "PRAGMA user_version") == [(1,)]


def test_reset_progress_forgets_one_problem_only(cli, workdir, torchcode_home):
    _old_store(torchcode_home, workdir)
    (workdir / "sdpa.py").write_text("# my work in progress\n")
    r = cli("reset", "sdpa", "--progress")  # stdin is not a terminal: it must be asked for explicitly
    assert r.code == 2 and "--yes" in r.err
    assert len(_rows(torchcode_home, "SELECT * FROM attempts WHERE problem = 'sdpa'")) == 2
    r = cli("reset", "--progress", "--yes")  # the problem started here
    assert r.code == 0 and "Forgot 2 attempts of sdpa" in r.out, r.text
    assert _rows(torchcode_home, "SELECT problem FROM attempts") == [("gqa",)]
    assert _rows(torchcode_home, "SELECT * FROM hints") == [("sdpa", 2)]
    assert (workdir / "sdpa.py").read_text() == "# my work in progress\n"  # the file is not touched
    assert not list(workdir.glob("sdpa.py.bak*"))
    r = cli("status")
    assert "1 solved" in r.out
    assert "No attempt of sdpa" in cli("history", "sdpa").out
    r = cli("reset", "sdpa", "--progress", "--yes")
    assert r.code == 0 and "nothing to forget" in r.out


def test_reset_progress_asks_on_a_terminal(workdir, torchcode_home):
    """Answering No (or nothing) at the prompt forgets nothing, and says so."""
    _old_store(torchcode_home, workdir)
    for answer, kept in ((b"n\n", 3), (b"y\n", 1)):
        out = on_a_terminal(["reset", "sdpa", "--progress"], answer, workdir)
        assert "Forget 2 attempts of sdpa" in out
        assert ("Nothing was forgotten" in out) == (answer == b"n\n"), out
        assert len(_rows(torchcode_home, "SELECT * FROM attempts")) == kept


MIGRATING_WRITER = """
import sys
from torchcode.progress import Store
s = Store()
for i in range(int(sys.argv[2])):
    s.record_attempt(problem=sys.argv[1], verdict="wrong_answer", passed=i, total=9, seconds=0.1,
                     kernel_seconds=0.01, sha256="x" * 64, file="f.py", seed=i, source=f"# {sys.argv[1]} {i}".encode())
"""


def test_many_processes_migrating_an_old_store_at_once_lose_nothing(workdir, torchcode_home):
    import subprocess
    import sys

    old = _old_store(torchcode_home, workdir)
    procs = [subprocess.Popen([sys.executable, "-c", MIGRATING_WRITER, f"p{k}", "5"], stderr=subprocess.PIPE)
             for k in range(6)]
    for p in procs:
        assert p.wait(timeout=120) == 0, p.stderr.read().decode()
    assert _rows(torchcode_home, "PRAGMA user_version") == [(2,)]
    assert len(_rows(torchcode_home, "SELECT * FROM attempts")) == len(old) + 30
    assert sorted(r[0] for r in _rows(torchcode_home, "SELECT source FROM attempts WHERE problem = 'p3'")) == [
        f"# p3 {i}".encode() for i in range(5)]
    assert [p.name for p in torchcode_home.iterdir() if ".corrupt-" in p.name] == []

"""Class folders and student folders with awkward names: a short relative class path (``c1``, ``8``, ``.``),
names that are not UTF-8, a student folder holding a file named like the gradebook, hidden folders, and
feedback names that could collide."""

from __future__ import annotations

import csv
import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FIXTURES, ROOT

CLASS = FIXTURES / "classroom" / "class"


def cli(*args: str, home: Path, cwd: Path, timeout: float = 180) -> subprocess.CompletedProcess:
    exe = shutil.which("torchcode")
    cmd = [exe] if exe else [sys.executable, "-m", "torchcode"]
    env = {**os.environ, "COLUMNS": "160", "NO_COLOR": "1", "TORCHCODE_HOME": str(home)}
    env.pop("TORCHCODE_PROBLEMS", None)
    return subprocess.run([*cmd, *args], cwd=cwd, env=env, capture_output=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def sheet(out: Path) -> dict[tuple[str, str], dict]:
    with (out / "grades.csv").open(newline="", encoding="utf-8") as f:
        return {(r["student"], r["problem"]): r for r in csv.DictReader(f)}


def small_class(folder: Path) -> None:
    for student in ("alice", "bob"):  # accepted, wrong_answer
        (folder / student).mkdir(parents=True)
        shutil.copy(CLASS / student / "sdpa.py", folder / student / "sdpa.py")


def _sha(p: Path) -> str:
    import hashlib

    return hashlib.sha256(p.read_bytes()).hexdigest()


@pytest.mark.parametrize("name", ["c1", "8", "."])
def test_a_class_folder_given_as_a_short_relative_path_is_graded_whole(tmp_path, name):
    """The class root was replaced by "<class>" as plain text over the report's JSON: "c1" inside a sha256
    made the row not match its file (not_graded, exit 0), "8" or "." broke the JSON (a traceback)."""
    base = tmp_path / "work"
    klass = base if name == "." else base / name
    small_class(klass)
    if name != ".":  # a hash holding the folder's name (the attack's case): pad the file until it does
        f = klass / "alice" / "sdpa.py"
        while name not in _sha(f):
            f.write_bytes(f.read_bytes() + b"\n")
    want = {"alice": "accepted", "bob": "wrong_answer"}
    out = tmp_path / "out"
    for attempt in (1, 2):
        p = cli("grade", name, "--problems", "sdpa", "--out", str(out), "--seed", "7", "--device", "cpu",
                "--workers", "1", home=tmp_path / "home", cwd=base)
        text = (p.stdout + p.stderr).decode(errors="replace")
        assert p.returncode == 0 and "Traceback" not in text, text
        rows = sheet(out)
        assert {s: rows[(s, "sdpa")]["verdict"] for s in want} == want, rows
        for s in want:
            assert rows[(s, "sdpa")]["sha256"] == _sha(klass / s / "sdpa.py")
        with sqlite3.connect(out / "gradebook.sqlite3") as conn:
            stored = dict(conn.execute("SELECT student, sha256 FROM results").fetchall())
        assert stored == {s: _sha(klass / s / "sdpa.py") for s in want}
        if attempt == 2:
            assert "0 to grade, 2 already graded" in text, text


def test_relabel_changes_only_the_whole_path_in_text_fields():
    from torchcode.classroom.pool import relabel

    report = {"file": "/tmp/c1/alice/sdpa.py", "sha256": "c1" * 32, "seed": 8,
              "message": "/tmp/c10/x and /tmp/c1/y, /tmp/c1.bak, in /tmp/c1.",
              "cases": [{"name": "/tmp/c1", "traceback": 'File "/tmp/c1/alice/sdpa.py", line 3', "seconds": 8.0}],
              "/tmp/c1": "key"}
    got = relabel(report, Path("/tmp/c1"), "<class>")
    assert got["file"] == "<class>/alice/sdpa.py" and got["sha256"] == "c1" * 32 and got["seed"] == 8
    assert got["message"] == "/tmp/c10/x and <class>/y, /tmp/c1.bak, in <class>."  # a sentence may end after it
    assert got["cases"][0] == {"name": "/tmp/c1", "traceback": 'File "<class>/alice/sdpa.py", line 3', "seconds": 8.0}
    assert got["/tmp/c1"] == "key"


def _odd_name_allowed(folder: Path, name: bytes) -> bool:
    try:
        os.mkdir(os.path.join(os.fsencode(folder), name))
    except (OSError, ValueError, UnicodeError):
        return False
    return True


def test_start_and_check_in_a_folder_whose_name_is_not_utf8(tmp_path):
    """The store refused the path (UnicodeEncodeError): start and check crashed, nothing was recorded."""
    if not _odd_name_allowed(tmp_path, b"d\xe9"):
        pytest.skip("this file system refuses names that are not UTF-8")
    work = Path(os.fsdecode(os.path.join(os.fsencode(tmp_path), b"d\xe9")))
    home = tmp_path / "home"
    p = cli("start", "repeat_kv", home=home, cwd=work)
    assert p.returncode == 0 and b"Traceback" not in p.stderr, p.stdout + p.stderr
    shutil.copy(ROOT / "solutions" / "repeat_kv.py", work / "repeat_kv.py")
    p = cli("check", home=home, cwd=work)  # the problem started last here: read back from the store
    assert p.returncode == 0 and b"Traceback" not in p.stderr and b"Accepted" in p.stdout, p.stdout + p.stderr
    odd = Path(os.fsdecode(os.path.join(os.fsencode(work), b"bad\xff\x1b[2Jname.py")))
    shutil.copy(work / "repeat_kv.py", odd)
    p = cli("check", str(odd), "--problem", "repeat_kv", home=home, cwd=work)
    assert p.returncode == 0 and b"Traceback" not in p.stderr, p.stdout + p.stderr
    with sqlite3.connect(home / "progress.sqlite3") as conn:
        files = [r[0] for r in conn.execute("SELECT file FROM attempts ORDER BY id")]
    assert len(files) == 2 and files[0].endswith("d\\xe9/repeat_kv.py") and "bad\\xff" in files[1], files


def test_a_student_folder_whose_name_is_not_utf8_is_graded_under_a_safe_name(tmp_path):
    klass = tmp_path / "class"
    small_class(klass)
    if not _odd_name_allowed(klass, b"bad\xff\xfename"):
        pytest.skip("this file system refuses names that are not UTF-8")
    odd = Path(os.fsdecode(os.path.join(os.fsencode(klass), b"bad\xff\xfename")))
    shutil.copy(CLASS / "bob" / "sdpa.py", odd / "sdpa.py")
    (klass / "bad\\xff\\xfename").mkdir()  # a folder named with backslashes: another student, not the same one
    shutil.copy(CLASS / "alice" / "sdpa.py", klass / "bad\\xff\\xfename" / "sdpa.py")
    name = "bad\\xff\\xfename-" + hashlib.sha256(b"bad\xff\xfename").hexdigest()[:8]
    out = tmp_path / "out"
    for attempt in (1, 2):
        p = cli("grade", "class", "--problems", "sdpa", "--out", "out", "--seed", "7", "--device", "cpu",
                "--workers", "1", home=tmp_path / "home", cwd=tmp_path)
        assert p.returncode == 0 and b"Traceback" not in p.stderr, p.stdout + p.stderr
    assert b"0 to grade, 4 already graded" in p.stdout
    rows = sheet(out)
    assert rows[(name, "sdpa")]["verdict"] == "wrong_answer", rows
    assert rows[("bad\\xff\\xfename", "sdpa")]["verdict"] == "accepted", rows
    files = json.loads((out / "grades.json").read_text(encoding="utf-8"))["feedback_files"]
    feedback = (out / files[name]).read_text(encoding="utf-8")
    assert feedback.startswith(f"Feedback for {name} ")


def test_a_file_named_like_the_gradebook_does_not_hide_a_student(tmp_path):
    """Only a gradebook grade wrote (its tables), in a folder with no Python file, marks an earlier output; a
    hidden folder is listed as skipped, never passed over in silence."""
    from torchcode.classroom.discover import discover
    from torchcode.classroom.gradebook import Gradebook

    klass = tmp_path / "class"
    small_class(klass)
    (klass / "bob" / "gradebook.sqlite3").write_text("not a gradebook")
    (klass / ".carol").mkdir()
    shutil.copy(CLASS / "alice" / "sdpa.py", klass / ".carol" / "sdpa.py")
    (klass / ".venv" / "bin").mkdir(parents=True)  # a tool's folder holds no submission: no notice
    (klass / ".venv" / "helpers.py").write_text("x = 1\n")
    Gradebook(klass / "old-grades").close()  # a real earlier output among the students
    (klass / "dave").mkdir()
    shutil.copy(CLASS / "alice" / "sdpa.py", klass / "dave" / "sdpa.py")
    Gradebook(klass / "dave").close()  # a real gradebook beside a student's file: still a student
    found = discover(klass, ["sdpa"], tmp_path / "unpacked")
    assert found.students == ["alice", "bob", "dave"]
    assert {s.student for s in found.submissions} == {"alice", "bob", "dave"}
    assert any(u.startswith(".carol/: a hidden folder") for u in found.unknown), found.unknown
    assert not any(u.startswith(".venv") for u in found.unknown), found.unknown
    assert any(u.startswith("old-grades/: an earlier `torchcode grade` output") for u in found.unknown), found.unknown
    p = cli("grade", "class", "--problems", "sdpa", "--out", "out", "--seed", "7", "--device", "cpu",
            "--workers", "1", home=tmp_path / "home", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert sheet(tmp_path / "out")[("bob", "sdpa")]["verdict"] == "wrong_answer"
    assert b".carol/: a hidden folder" in p.stdout and b".venv" not in p.stdout
    p = cli("grade", "class", "--problems", "sdpa", "--out", "class/.grades", "--seed", "7", "--device", "cpu",
            "--workers", "1", home=tmp_path / "home", cwd=tmp_path)  # grades kept in a hidden folder of the class
    p = cli("grade", "class", "--problems", "sdpa", "--out", "class/.grades", "--seed", "7", "--device", "cpu",
            "--workers", "1", home=tmp_path / "home", cwd=tmp_path)
    assert p.returncode == 0 and b".grades/: a hidden folder" not in p.stdout, p.stdout + p.stderr
    assert any(u.startswith(".carol/") for u in json.loads((tmp_path / "out" / "grades.json").read_text())["unknown_files"])


def test_feedback_file_names_stay_distinct_when_a_folder_copies_the_fallback_name():
    """x~y -> x_y-<8 hex>; taken by a classmate's folder, the fallback (x_y-<8 hex>-<16 hex>) could be taken too:
    two students wrote one feedback file. Also distinct ignoring case (macOS, Windows)."""
    import hashlib

    from torchcode.classroom.feedback import _safe, file_names

    first = _safe("x~y")
    second = f"{first}-{hashlib.sha256(b'x~y').hexdigest()[:16]}"
    for students in (["x~y", first, second], [first, second, "x~y"], [second.upper(), first, "x~y"],
                     ["A", "a", f"a-{hashlib.sha256(b'a').hexdigest()[:16]}", "A-" + hashlib.sha256(b"a").hexdigest()[:16]]):
        names = file_names(students)
        assert len({n.casefold() for n in names.values()}) == len(students), names


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
@pytest.mark.parametrize("target", ["/dev/null", "fifo"])
def test_grading_a_device_or_a_pipe_is_one_message(tmp_path, target):
    if target == "fifo":
        os.mkfifo(tmp_path / "fifo")
    elif not os.path.exists(target):
        pytest.skip("no /dev/null here")
    p = cli("grade", target, "--out", "x", home=tmp_path / "home", cwd=tmp_path, timeout=60)
    assert p.returncode == 2 and b"Traceback" not in p.stderr, p.stdout + p.stderr
    assert b"is neither a folder nor a zip file" in p.stderr
    assert not (tmp_path / "x").exists()


def test_a_student_name_with_a_newline_never_breaks_a_line_of_the_run(tmp_path):
    klass = tmp_path / "class"
    (klass / "new\nline").mkdir(parents=True)
    shutil.copy(CLASS / "bob" / "sdpa.py", klass / "new\nline" / "sdpa.py")
    p = cli("grade", "class", "--problems", "sdpa", "--out", "out", "--seed", "7", "--device", "cpu",
            "--workers", "1", "--feedback", "full", home=tmp_path / "home", cwd=tmp_path)
    out = p.stdout.decode()
    assert p.returncode == 0 and b"Traceback" not in p.stderr, out + p.stderr.decode()
    assert "(last: new\\nline/sdpa.py)" in out, out
    assert not any(ln.startswith("line") for ln in out.splitlines()), out
    assert sheet(tmp_path / "out")[("new\nline", "sdpa")]["verdict"] == "wrong_answer"  # the record keeps the name

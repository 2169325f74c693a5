"""`torchcode grade`: a whole class on a pool of warm grading sessions, locally and through Ray.

The fixture class (tests/fixtures/classroom/class) has correct, wrong, crashing and hostile
submissions to three problems; each file's `# expect:` line is its verdict. Every CLI run here
is a real `torchcode grade` process with real sessions, workers and SQLite files.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

import pytest

from conftest import FIXTURES, ROOT, expected_verdict
from torchcode.classroom.discover import discover
from torchcode.grader import confine

CLASS = FIXTURES / "classroom" / "class"
PROBLEMS = ["sdpa", "repeat_kv", "causal_attention"]
PROBLEM_ARGS = ["--problems", ",".join(PROBLEMS)]
CONFINABLE = sys.platform == "linux" and confine._abi() >= 1
SEED = "424242"


def expected_sheet() -> dict[tuple[str, str], str]:
    """(student, problem) -> verdict, from the fixture files; 'missing' where a student has no file."""
    sheet = {}
    for student in sorted(p.name for p in CLASS.iterdir() if p.is_dir()):
        for problem in PROBLEMS:
            f = CLASS / student / f"{problem}.py"
            if not f.is_file():
                sheet[(student, problem)] = "missing"
            elif "# needs: confinement" in f.read_text() and not CONFINABLE:
                sheet[(student, problem)] = None  # unconfined, it may kill the session or reach a classmate's file
            else:
                sheet[(student, problem)] = expected_verdict(f)
    return sheet


def same_verdicts(sheet: dict, want: dict) -> bool:
    """grades.csv's verdicts are the expected ones (where one is expected on this machine)."""
    return ({k: r["verdict"] for k, r in sheet.items() if want.get(k, "") is not None}
            == {k: v for k, v in want.items() if v is not None})


SUBMITTED = sum(v != "missing" for v in expected_sheet().values())


def grades(out: Path) -> dict[tuple[str, str], dict]:
    with (out / "grades.csv").open(newline="") as f:
        return {(r["student"], r["problem"]): r for r in csv.DictReader(f)}


def gradebook_rows(out: Path) -> list[tuple]:
    with sqlite3.connect(out / "gradebook.sqlite3") as conn:
        return conn.execute("SELECT student, problem, sha256, seed, verdict FROM results ORDER BY 1, 2").fetchall()


def grade_cli(*args: str, home: Path, cwd: Path, timeout: float = 180) -> subprocess.CompletedProcess:
    exe = shutil.which("torchcode")
    cmd = [exe] if exe else [sys.executable, "-m", "torchcode"]
    env = {**os.environ, "COLUMNS": "160", "NO_COLOR": "1", "TORCHCODE_HOME": str(home)}
    env.pop("TORCHCODE_PROBLEMS", None)
    return subprocess.run([*cmd, "grade", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def local_run(tmp_path_factory):
    """The fixture class graded once on the local pool (2 workers), shared by the tests below."""
    base = tmp_path_factory.mktemp("local")
    out = base / "out"
    p = grade_cli(str(CLASS), *PROBLEM_ARGS, "--out", str(out), "--workers", "2", "--seed", SEED, "--device", "cpu",
                  home=base / "home", cwd=base)
    return p, out


# -- finding the submissions ---------------------------------------------------------------------
def test_discover_lists_submissions_and_unknown_files(tmp_path):
    found = discover(CLASS, PROBLEMS, tmp_path / "unpacked")
    assert found.root == CLASS
    assert found.students == sorted(p.name for p in CLASS.iterdir() if p.is_dir())
    wanted = {k for k, v in expected_sheet().items() if v != "missing"}
    assert {s.key for s in found.submissions} == wanted
    unknown = {u.split(":")[0] for u in found.unknown}
    assert unknown == {"README.txt", "erin/notes.txt", "erin/gqa_draft.py", "frank/masks.py"}
    only = discover(CLASS, ["repeat_kv"], tmp_path / "unpacked", known=("sdpa", "repeat_kv", "causal_attention"))
    assert {u.split(":")[0] for u in only.unknown} == unknown | {"erin/", "mallory/", "frank/"}  # others' files are not unknown


def test_a_students_folder_is_read_once_for_all_their_submissions(tmp_path, monkeypatch):
    """Each submission's fingerprint digests the rest of its folder: a folder with many (or large) files was read
    again for each of the student's submissions. The digests stay those of one folder_digest call each."""
    from torchcode.classroom.discover import folder_digest

    alice = tmp_path / "class" / "alice"
    (alice / "data").mkdir(parents=True)
    (tmp_path / "class" / "bob").mkdir()
    for p in ("sdpa", "repeat_kv", "causal_attention"):
        (alice / f"{p}.py").write_text(f"# {p}\n")
    for i in range(20):
        (alice / "data" / f"part{i}.bin").write_bytes(os.urandom(1000))
    reads: list[str] = []
    real = Path.read_bytes
    monkeypatch.setattr(Path, "read_bytes", lambda self: reads.append(self.name) or real(self))
    found = discover(tmp_path / "class", ["sdpa", "repeat_kv", "causal_attention"], tmp_path / "unpacked")
    assert len(found.submissions) == 3 and len({s.folder for s in found.submissions}) == 3
    assert sorted(n for n in reads if n.endswith(".bin")) == sorted(f"part{i}.bin" for i in range(20))  # once each
    monkeypatch.setattr(Path, "read_bytes", real)
    assert [s.folder for s in found.submissions] == [folder_digest(alice, s.path) for s in found.submissions]
    # what a grade never reads changes nothing: Finder's .DS_Store (rewritten as the instructor browses), checkpoints
    (alice / ".DS_Store").write_bytes(b"\0\0\0\1Bud1")
    (alice / "data" / ".ipynb_checkpoints").mkdir()
    (alice / "data" / ".ipynb_checkpoints" / "x-checkpoint.ipynb").write_text("{}")
    assert [folder_digest(alice, s.path) for s in found.submissions] == [s.folder for s in found.submissions]


def test_a_helper_beside_a_submission_is_part_of_what_it_is_graded_on(tmp_path):
    """The other files of a student's folder (a helper module the submission imports, a data file it reads) count
    in the fingerprint a rerun compares: changing only the helper grades the file again (it kept the old verdict)."""
    alice = tmp_path / "class" / "alice"
    alice.mkdir(parents=True)
    (alice / "sdpa.py").write_text("from helper import scaled_dot_product_attention\n")
    (tmp_path / "class" / "bob").mkdir()  # two students: the class folder is not a wrapper to go down through

    def sub():
        (found,) = discover(tmp_path / "class", ["sdpa"], tmp_path / "unzip").submissions
        return found

    alone = sub()
    assert alone.folder == "" and alone.fingerprint("fp") == "fp"  # nothing beside it: as before
    (alice / "helper.py").write_text("def scaled_dot_product_attention(Q, K, V, mask=None):\n    return V\n")
    first = sub()
    (alice / "helper.py").write_text("def scaled_dot_product_attention(Q, K, V, mask=None):\n    return Q\n")
    second = sub()
    assert first.sha256 == second.sha256 == alone.sha256  # the file itself is unchanged
    assert len({alone.fingerprint("fp"), first.fingerprint("fp"), second.fingerprint("fp")}) == 3
    (alice / "data").mkdir()
    (alice / "data" / "cached.txt").write_text("1")
    assert sub().fingerprint("fp") != second.fingerprint("fp")


def test_the_output_folder_among_the_students_is_not_a_student(tmp_path):
    work = tmp_path / "class"
    shutil.copytree(CLASS, work)
    (work / "grades").mkdir()
    (work / "grades" / "grades.csv").write_text("student,problem\n")
    found = discover(work, PROBLEMS, tmp_path / "unpacked", skip=work / "grades")
    assert "grades" not in found.students and not any(u.startswith("grades") for u in found.unknown)
    assert "grades" in discover(work, PROBLEMS, tmp_path / "unpacked2").students  # without skip it would be


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
def test_a_named_pipe_posing_as_a_submission_is_skipped_not_waited_on(tmp_path):
    """A student folder unpacked from a tar can hold a FIFO named like a problem: reading it would wait forever
    for a writer (the whole class's grading hung). Only regular files are submissions."""
    work = tmp_path / "class"
    (work / "mallory").mkdir(parents=True)
    os.mkfifo(work / "mallory" / "sdpa.py")
    (work / "mallory" / "repeat_kv.py").write_text("def repeat_kv(x, n_rep):\n    return x\n")
    found: list = []
    t = threading.Thread(target=lambda: found.append(discover(work, PROBLEMS, tmp_path / "unpacked")), daemon=True)
    t.start()
    t.join(timeout=20)
    if t.is_alive():  # release the blocked reader before failing
        with open(work / "mallory" / "sdpa.py", "wb"):
            pass
        t.join(timeout=5)
    assert found, "discovering the submissions waited on a named pipe"
    assert [s.key for s in found[0].submissions] == [("mallory", "repeat_kv")]
    assert any(u.startswith("mallory/sdpa.py: not a regular file") for u in found[0].unknown), found[0].unknown


def test_zip_is_unpacked_safely_through_wrapper_folders(tmp_path):
    archive = tmp_path / "export.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for f in CLASS.rglob("*.py"):
            z.write(f, "export/class/" + f.relative_to(CLASS).as_posix())
        z.writestr("__MACOSX/export/._alice", "junk")
        z.writestr("../escaped.py", "print('outside')")
        z.writestr("/abs/evil.py", "print('absolute')")
        link = zipfile.ZipInfo("export/class/bob/link.py")
        link.external_attr = (0o120777 << 16)
        z.writestr(link, "/etc/passwd")
    dest = tmp_path / "sandbox" / "unpacked"
    found = discover(archive, PROBLEMS, dest)
    assert found.root == dest / "export" / "class"
    assert {s.key for s in found.submissions} == {k for k, v in expected_sheet().items() if v != "missing"}
    assert not (tmp_path / "sandbox" / "escaped.py").exists() and not (tmp_path / "escaped.py").exists()
    assert sorted(u.split(":")[0] for u in found.unknown if "skipped" in u) == ["../escaped.py", "/abs/evil.py",
                                                                               "export/class/bob/link.py"]
    assert not (found.root / "bob" / "link.py").exists()


def test_a_zip_student_whose_only_file_is_skipped_keeps_a_row_and_a_repeated_member_is_said(tmp_path):
    """As in a class given as a folder: a student whose only file is a link, too large or a folder still has a
    folder (so a 'missing' row and a reason), and a member the zip holds twice is named, the last copy graded."""
    from torchcode.classroom.discover import MAX_FILE

    archive = tmp_path / "export.zip"
    right, wrong = (CLASS / "alice" / "sdpa.py").read_bytes(), b"def scaled_dot_product_attention(*a): return 0\n"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("export/carol/sdpa.py", right)
        z.writestr("export/carol/sdpa.py", wrong)
        link = zipfile.ZipInfo("export/frank/sdpa.py")
        link.external_attr = (0o120777 << 16)
        z.writestr(link, "/etc/passwd")
        z.writestr("export/gina/sdpa.py", b"#" * (MAX_FILE + 1))
        z.writestr(zipfile.ZipInfo("export/hank/sdpa.py/"), b"")
        z.writestr("export/ivan/sdpa.py", right)
        z.writestr("export/ivan/sdpa.py", b"#" * (MAX_FILE + 1))  # a later copy skipped: the first one is graded
    found = discover(archive, ["sdpa"], tmp_path / "unpacked")
    assert found.students == ["carol", "frank", "gina", "hank", "ivan"]
    assert [s.student for s in found.submissions] == ["carol", "ivan"]
    assert (found.root / "ivan" / "sdpa.py").read_bytes() == right
    assert (found.root / "carol" / "sdpa.py").read_bytes() == wrong
    said = "\n".join(found.unknown)
    assert "export/carol/sdpa.py: in the zip 2 times; the last copy is graded" in said, said
    assert "export/ivan/sdpa.py: in the zip 2 times; copy 1 (the last one unpacked) is graded" in said, said
    for student, why in [("frank", "a link inside the zip"), ("gina", "too large"), ("hank", "a folder inside")]:
        assert f"export/{student}/sdpa.py: {why}" in said and f"export/{student}/: no submission for sdpa" in said, said


def test_an_empty_or_skipped_folder_beside_the_class_in_a_zip_does_not_stop_the_descent(tmp_path):
    """Folder entries (as `zip -r` writes one for every folder) and a wrapper-level folder whose only member is
    skipped: the class is still found under the wrappers, and no folder is made for them."""
    from torchcode.classroom.discover import MAX_FILE

    archive = tmp_path / "export.zip"
    right = (CLASS / "alice" / "sdpa.py").read_bytes()
    with zipfile.ZipFile(archive, "w") as z:
        for folder in ("export/", "export/class/", "export/class/alice/", "export/class/bob/", "export/notes/",
                       "export/class/dora/"):
            z.writestr(zipfile.ZipInfo(folder), b"")
        z.writestr("export/class/alice/sdpa.py", right)
        z.writestr("export/class/bob/sdpa.py", right)
        z.writestr("export/slides/big.bin", b"x" * (MAX_FILE + 1))
    found = discover(archive, ["sdpa"], tmp_path / "unpacked")
    assert found.root == tmp_path / "unpacked" / "export" / "class"
    assert found.students == ["alice", "bob", "dora"] and len(found.submissions) == 2
    assert not (tmp_path / "unpacked" / "export" / "notes").exists()
    assert not (tmp_path / "unpacked" / "export" / "slides").exists()


@pytest.mark.parametrize("args, message", [
    (["nowhere"], "no such folder or zip"),
    (["notes.txt"], "neither a folder nor a zip"),
    (["empty"], "no submissions in empty"),
    ([str(CLASS), "--problems", "sdpaa"], "Did you mean: sdpa"),
    ([str(CLASS), "--feedback", "all"], "--feedback must be one of full, summary, none"),
    ([str(CLASS), "--workers", "0"], "--workers must be at least 1"),
    ([str(CLASS), "--problems", "rope", "--dtype", "float16"], "rope is not graded in float16"),
])
def test_bad_input_is_one_message(tmp_path, args, message):
    (tmp_path / "notes.txt").write_text("hello")
    (tmp_path / "empty").mkdir()
    p = grade_cli(*args, "--out", "out", home=tmp_path / "home", cwd=tmp_path, timeout=60)
    assert p.returncode == 2, p.stdout + p.stderr
    assert message in p.stderr and "Traceback" not in p.stderr
    assert not (tmp_path / "out").exists()  # nothing written for a run that could not start


# -- the local pool ---------------------------------------------------------------------------------
def test_class_graded_with_csv_json_feedback_and_summary(local_run):
    p, out = local_run
    want = expected_sheet()
    assert p.returncode == 0 or None in want.values() and p.returncode == 1, p.stdout + p.stderr
    sheet = grades(out)
    assert same_verdicts(sheet, want)
    for (student, problem), r in sheet.items():
        if r["verdict"] == "accepted":
            assert r["cases_passed"] == r["cases_total"] and float(r["score"]) == 1.0
        if r["verdict"] not in ("missing", "not_graded"):
            f = CLASS / student / f"{problem}.py"
            import hashlib

            assert r["sha256"] == hashlib.sha256(f.read_bytes()).hexdigest()
            assert float(r["seconds"]) > 0 and 0 <= float(r["score"]) <= 1
    assert sheet[("bob", "repeat_kv")]["verdict"] == "wrong_answer" and 0 < float(sheet[("bob", "repeat_kv")]["score"]) < 1

    doc = json.loads((out / "grades.json").read_text())
    assert doc["seed"] == int(SEED) and doc["status"] in ("done", "incomplete")
    assert all(r["report"]["seed"] == int(SEED) for r in doc["results"] if "report" in r)
    assert any("notes.txt" in u for u in doc["unknown_files"])

    # feedback: the report check shows, under the name the student knows, never the instructor's paths
    bob = (out / "feedback" / "bob.txt").read_text()
    assert "Wrong answer  sdpa  sdpa.py" in bob and "max abs err" in bob
    assert f"torchcode check sdpa.py --problem sdpa --seed {SEED}" in bob
    erin = (out / "feedback" / "erin.txt").read_text()
    assert "no repeat_kv.py was submitted" in erin and "expected ':'" in erin
    assert not any(str(CLASS) in (out / "feedback" / f).read_text() for f in os.listdir(out / "feedback"))

    # the terminal: unknown files listed, the seed, the summary with pass rates and the failed cases
    assert "erin/notes.txt: not a .py file" in p.stdout and "README.txt: not a student folder" in p.stdout
    assert f"seed {SEED}" in p.stdout and f"{SUBMITTED} to grade on 2 local workers (cpu)" in p.stdout
    # not a terminal (a CI log, `| tee`): plain progress lines, the first result's and the last one
    assert f"grading 1/{SUBMITTED} (" in p.stdout and f"grading {SUBMITTED}/{SUBMITTED} (100%)" in p.stdout
    assert "ETA" not in p.stdout and "\r" not in p.stdout
    assert "Class summary" in p.stdout and "Cases the class failed most" in p.stdout
    # erin's file does not load: no case of it ran, so the per-case counts say what they count
    assert "failed/ran" in p.stdout and "crashed before its cases, counts in the table above only" in " ".join(
        p.stdout.split()), p.stdout
    sdpa_line = next(line for line in p.stdout.splitlines() if line.startswith("│ sdpa "))
    accepted = sum(v == "accepted" for (s, pr), v in want.items() if pr == "sdpa")
    if None not in want.values():
        submitted = sum(pr == "sdpa" and v != "missing" for (s, pr), v in want.items())  # frank has no sdpa.py
        assert f"{accepted / submitted:.0%}" in sdpa_line


def test_rerun_grades_only_what_changed(local_run, tmp_path):
    _, out = local_run
    work = tmp_path / "class"
    shutil.copytree(CLASS, work)
    out2 = tmp_path / "out"
    shutil.copytree(out, out2)
    before = gradebook_rows(out2)
    args = [str(work), *PROBLEM_ARGS, "--out", str(out2), "--device", "cpu"]

    p = grade_cli(*args, home=tmp_path / "home", cwd=tmp_path)  # same files, no --seed: the gradebook's seed
    assert f"0 to grade, {SUBMITTED} already graded (unchanged)" in p.stdout, p.stdout + p.stderr
    assert f"seed {SEED}" in p.stdout and gradebook_rows(out2) == before
    assert same_verdicts(grades(out2), expected_sheet())

    # bob fixes sdpa with a helper module beside it: a new file in his folder, which his other files could import
    # too, so all three of his are graded again (a helper that changes alone must not leave a stale verdict)
    shutil.copy(CLASS / "alice" / "sdpa.py", work / "bob" / "helper.py")
    (work / "bob" / "sdpa.py").write_text("from helper import scaled_dot_product_attention  # noqa: F401\n")
    p = grade_cli(*args, "--feedback", "summary", "--workers", "1", home=tmp_path / "home", cwd=tmp_path)
    assert f"3 to grade, {SUBMITTED - 3} already graded (unchanged)" in p.stdout, p.stdout + p.stderr
    assert grades(out2)[("bob", "sdpa")]["verdict"] == "accepted"
    assert [r for r in gradebook_rows(out2) if r[0] != "bob"] == [r for r in before if r[0] != "bob"]
    bob = (out2 / "feedback" / "bob.txt").read_text()
    assert re.search(r"Accepted  sdpa  (\d+)/\1 cases", bob) and "max abs err" not in bob  # summary: verdicts only

    # --bench: the accepted sdpa kernels (alice's, and bob's copy of it) timed against the reference, ranked
    p = grade_cli(str(work), "--problems", "sdpa", "--out", str(out2), "--device", "cpu", "--bench",
                  home=tmp_path / "home", cwd=tmp_path)
    assert "Benchmarking 2 accepted kernels" in p.stdout and "Fastest accepted kernels" in p.stdout, p.stdout + p.stderr
    sheet = grades(out2)
    assert sorted(sheet[(s, "sdpa")]["rank"] for s in ("alice", "bob")) == ["1", "2"]
    assert all(float(sheet[(s, "sdpa")]["x_ref"]) > 0 and float(sheet[(s, "sdpa")]["ms"]) > 0 for s in ("alice", "bob"))
    assert sheet[("carol", "sdpa")]["rank"] == "" and sheet[("carol", "sdpa")]["x_ref"] == ""
    assert "the reference's time" in (out2 / "feedback" / "alice.txt").read_text()
    p = grade_cli(str(work), "--problems", "2", "--out", str(out2), "--device", "cpu", "--bench",  # sdpa, as `list` numbers it
                  home=tmp_path / "home", cwd=tmp_path)
    assert p.returncode == 0 and "0 to grade, " in p.stdout, p.stdout + p.stderr
    assert "Benchmarking" not in p.stdout and grades(out2)[("alice", "sdpa")]["x_ref"] == sheet[("alice", "sdpa")]["x_ref"]

    # the same class as a zip (an LMS export, wrapped in a folder), one problem, a new seed: graded again
    archive = tmp_path / "class.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for f in work.rglob("*"):
            if f.is_file():
                z.write(f, "lms-export/" + f.relative_to(work).as_posix())
    feedback_before = (out2 / "feedback" / "bob.txt").read_text()
    p = grade_cli(str(archive), "--problems", "Repeat-KV", "--out", str(out2), "--seed", "7", "--device", "cpu",
                  "--workers", "2", "--feedback", "none", home=tmp_path / "home", cwd=tmp_path)
    assert "The seed changes from 424242 to 7" in p.stdout and "4 to grade" in p.stdout, p.stdout + p.stderr
    assert "lms-export/erin/notes.txt: not a .py file" in p.stdout
    assert {r[3] for r in gradebook_rows(out2) if r[1] == "repeat_kv"} == {7}
    want = {k: v for k, v in expected_sheet().items() if k[1] == "repeat_kv"}
    assert same_verdicts(grades(out2), want)
    assert (out2 / "feedback" / "bob.txt").read_text() == feedback_before  # --feedback none writes none


def in_terminal(cmd: list[str], cwd: Path, env: dict, timeout: float = 120) -> tuple[int, str]:
    """Run ``cmd`` with a pseudo-terminal as stdout and stderr; return its exit code and what it showed."""
    import pty
    import select

    main, sub = pty.openpty()
    proc = subprocess.Popen(cmd, cwd=cwd, env={**env, "COLUMNS": "120", "TERM": "xterm"}, stdin=subprocess.DEVNULL,
                            stdout=sub, stderr=sub, close_fds=True)
    os.close(sub)
    chunks, deadline = [], time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([main], [], [], 0.5)
            if ready:
                try:
                    data = os.read(main, 1 << 16)
                except OSError:  # the terminal closed: the command ended
                    break
                if not data:
                    break
                chunks.append(data)
            elif proc.poll() is not None:
                break
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(main)
    return proc.returncode, b"".join(chunks).decode("utf-8", "replace")


def _children(pid: int) -> set[int]:
    found, todo = set(), [pid]
    while todo:
        p = todo.pop()
        for task in Path(f"/proc/{p}/task").glob("*"):
            try:
                kids = [int(k) for k in (task / "children").read_text().split()]
            except OSError:
                continue
            found.update(kids)
            todo.extend(kids)
    return found


def test_ctrl_c_keeps_what_is_done_and_the_rerun_finishes(tmp_path):
    N = 4
    work = tmp_path / "class"
    slow = ("import time\n\n\ndef repeat_kv(x, n_rep):\n    time.sleep(0.1)\n    B, S, H, D = x.shape\n"
            "    return x[:, :, :, None, :].expand(B, S, H, n_rep, D).reshape(B, S, H * n_rep, D)\n")
    for n in range(N):  # the last student's name looks like rich markup (graded last, on the terminal)
        student = work / (f"s{n}" if n < N - 1 else f"s{n}[red]")
        student.mkdir(parents=True)
        (student / "repeat_kv.py").write_text(slow)
    out = tmp_path / "out"
    exe = shutil.which("torchcode")
    cmd = [exe] if exe else [sys.executable, "-m", "torchcode"]
    env = {**os.environ, "TORCHCODE_HOME": str(tmp_path / "home"), "NO_COLOR": "1"}
    proc = subprocess.Popen([*cmd, "grade", str(work), "--problems", "repeat_kv", "--out", str(out), "--workers", "1",
                             "--device", "cpu"], cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, stdin=subprocess.DEVNULL)
    lines: list[str] = []  # stdout as it arrives: a pipe, as in a CI log
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")), daemon=True)
    reader.start()
    try:
        deadline, kids = time.monotonic() + 120, set()
        while time.monotonic() < deadline:
            kids |= _children(proc.pid)
            try:
                if (out / "gradebook.sqlite3").exists() and len(gradebook_rows(out)) >= 1:
                    break
            except sqlite3.OperationalError:  # the file exists, its tables not yet
                pass
            time.sleep(0.2)
        else:
            pytest.fail("no result reached the gradebook")
        while time.monotonic() < deadline and not any(ln.startswith(f"grading 1/{N} (") for ln in lines):
            time.sleep(0.05)  # the first result's progress line reaches the pipe while the run goes on
        assert any(ln.startswith(f"grading 1/{N} (") for ln in lines), lines
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
        stderr = proc.stderr.read()
        reader.join(10)
        stdout = "".join(lines)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stdout + stderr
    assert "interrupted: the results graded so far are kept in" in stderr and "Traceback" not in stderr
    kept = gradebook_rows(out)
    assert 1 <= len(kept) < N and {r[4] for r in kept} == {"accepted"}
    sheet = grades(out)  # written for what is done
    assert sum(r["verdict"] == "accepted" for r in sheet.values()) == len(kept)
    assert sum(r["verdict"] == "not_graded" for r in sheet.values()) == N - len(kept)
    assert {r["score"] for r in sheet.values() if r["verdict"] == "not_graded"} == {""}  # no result, not a zero
    time.sleep(0.5)
    assert kids and not [k for k in kids if Path(f"/proc/{k}").exists()], "a session process was left running"

    # the rerun, on a terminal: it grades only the rest, with a progress bar and its ETA
    code, shown = in_terminal([*cmd, "grade", str(work), "--problems", "repeat_kv", "--out", str(out), "--workers", "1",
                               "--device", "cpu"], cwd=tmp_path, env=env)
    assert code == 0 and "Traceback" not in shown, shown
    assert f"s{N - 1}[red]/repeat_kv.py" in shown  # graded last, named on the progress line as it is (not as markup)
    assert f"{N - len(kept)} to grade, {len(kept)} already graded" in shown
    assert "grading" in shown and "ETA" in shown and f"{N - len(kept)}/{N - len(kept)}" in shown
    assert set(kept) <= set(gradebook_rows(out))  # the rows kept were not graded again
    assert {r["verdict"] for r in grades(out).values()} == {"accepted"}


def test_gpu_dry_run_puts_its_advice_in_the_feedback(tmp_path):
    """`grade --gpu-dry-run`: an accepted kernel that makes a tensor on the CPU is told, in its feedback
    (full and summary), what `check --gpu-dry-run` tells; the verdict stays accepted."""
    reference = (Path(__file__).resolve().parents[1] / "solutions" / "causal_attention.py").read_text()
    for student, text in (("ann", reference.replace(", device=Q.device", "")), ("ben", reference),
                          ("cal", "from mykernels import causal_attention  # noqa: F401\n")):
        (tmp_path / "class" / student).mkdir(parents=True)
        (tmp_path / "class" / student / "causal_attention.py").write_text(text)
        (tmp_path / "class" / student / "notes.txt").write_text("my notes")  # one line for all three, not three
    (tmp_path / "class" / "cal" / "mykernels.py").write_text(reference)  # a module of the student's own, beside it
    out = tmp_path / "out"
    # no --problems: the assignment is what the class handed in (the course's 11 others were 'missing' rows for all)
    p = grade_cli(str(tmp_path / "class"), "--out", str(out), "--workers", "1",
                  "--device", "cpu", "--gpu-dry-run", "--feedback", "summary", home=tmp_path / "home", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "Grading the problems the class submitted: causal_attention (--problems" in " ".join(p.stdout.split())
    # listed, but not as if it were ignored: cal's kernel imports it (accepted below)
    assert "cal/mykernels.py: not a problem being graded (a module the student's files may import)" in p.stdout
    assert "notes.txt in 3 student folders (ann, ben, cal): not a .py file" in p.stdout and "ann/notes" not in p.stdout
    assert {k: r["verdict"] for k, r in grades(out).items()} == {("ann", "causal_attention"): "accepted",
                                                                  ("ben", "causal_attention"): "accepted",
                                                                  ("cal", "causal_attention"): "accepted"}
    ann, ben = (out / "feedback" / "ann.txt").read_text(), (out / "feedback" / "ben.txt").read_text()
    assert "would fail on a GPU" in ann and "line 11 (`causal = torch.ones(" in ann, ann
    assert "would fail on a GPU" not in ben, ben


# -- Ray ----------------------------------------------------------------------------------------------
def test_ray_results_equal_the_local_pool(local_run, tmp_path):
    """A real local Ray cluster (ray.init with 2 CPUs, two actors, one session each) grades the class,
    plus a problem from an extra pack that travels to the actors."""
    try:
        import ray  # noqa: F401
    except ImportError:
        why = "the Ray test needs ray: pip install -e '.[test]' (Ray is in the test extra)"
        if os.environ.get("CI"):  # CI installs the test extra: there, a missing Ray is a failure
            pytest.fail(why + " (CI installs the test extra)", pytrace=False)
        pytest.skip(why)
    _, local_out = local_run
    pack = FIXTURES / "course_pack"
    work = tmp_path / "class"
    shutil.copytree(CLASS, work)
    shutil.copy(pack / "solutions" / "good_attention.py", work / "alice" / "good_attention.py")
    shutil.copy(pack / "problems" / "good_attention" / "wrong" / "missing_scale.py", work / "bob" / "good_attention.py")
    out = tmp_path / "out"
    p = grade_cli(str(work), "--problems", ",".join(PROBLEMS + ["good_attention"]), "--problems-dir", str(pack),
                  "--out", str(out), "--workers", "2", "--seed", SEED, "--device", "cpu", "--ray",
                  home=tmp_path / "home", cwd=tmp_path, timeout=300)
    assert f"{SUBMITTED + 2} to grade on 2 Ray workers (cpu)" in p.stdout, p.stdout + p.stderr
    assert "Traceback" not in p.stderr

    def comparable(sheet):
        return {k: {c: v for c, v in r.items() if c != "seconds"} for k, r in sheet.items() if k[1] in PROBLEMS}

    ray_sheet = grades(out)
    assert comparable(ray_sheet) == comparable(grades(local_out))
    assert ray_sheet[("alice", "good_attention")]["verdict"] == "accepted"
    assert ray_sheet[("bob", "good_attention")]["verdict"] == "wrong_answer"
    assert ray_sheet[("carol", "good_attention")]["verdict"] == "missing"

    def cases(d):
        return {(r["student"], r["problem"]): [(c["name"], c["verdict"]) for c in r.get("cases", [])]
                for r in d["results"] if r["problem"] in PROBLEMS}

    assert cases(json.loads((out / "grades.json").read_text())) == cases(json.loads((local_out / "grades.json").read_text()))
    ray_bob = (out / "feedback" / "bob.txt").read_text()
    local_bob = (local_out / "feedback" / "bob.txt").read_text()
    assert ray_bob.split("== good_attention")[0].count("Wrong answer") == local_bob.count("Wrong answer") > 0
    assert "Wrong answer  good_attention  good_attention.py" in ray_bob
    # the student's reproduce line names the pack by its folder's name (without it: "no problem named ...")
    assert "--problem good_attention --seed 424242 --problems-dir course_pack`" in ray_bob, ray_bob


def test_feedback_file_names_never_collide():
    from torchcode.classroom.feedback import _safe

    names = ["alice", "a b", "a_b", "../x", ".hidden", "Zoë"]
    files = [_safe(n) for n in names]
    assert files[0] == "alice" and len(set(files)) == len(names)
    assert all("/" not in f and not f.startswith(".") for f in files)


def test_a_folder_named_like_another_students_feedback_file_cannot_take_it(tmp_path):
    """A folder named as another's cleaned name ("a b" -> a_b-<hash>), or differing only in case (one file on
    macOS or Windows), gets a file of its own: nobody's feedback is overwritten by a classmate's."""
    import hashlib

    from torchcode.classroom.feedback import Entry, _safe, write_feedback

    mimic = f"a_b-{hashlib.sha256(b'a b').hexdigest()[:8]}"
    assert _safe("a b") == mimic  # the name the attacker's folder copies
    students = ["a b", mimic, "Alice", "alice", "\ud55c\uacb0", "\u1112\u1161\u11ab\u1100\u1167\u11af"]  # NFC, NFD
    write_feedback(tmp_path, [Entry(s, "sdpa") for s in students], seed=1, mode="full")
    files = sorted(tmp_path.iterdir())
    import unicodedata

    assert len({unicodedata.normalize("NFC", f.name).casefold() for f in files}) == len(students)
    owners = sorted(f.read_text().splitlines()[0] for f in files)
    assert owners == sorted(f"Feedback for {s} (torchcode grade, seed 1)" for s in students)
    # grades.json says whose file is whose (to send each student theirs; a cleaned name is not guessable)
    from torchcode.classroom.feedback import write_json

    write_json(tmp_path / "grades.json", [Entry(s, "sdpa") for s in students], seed=1, problems=["sdpa"], unknown=[],
               status="done", feedback="full")
    given = json.loads((tmp_path / "grades.json").read_text())["feedback_files"]
    assert sorted(given) == sorted(students)
    for s, f in given.items():
        assert f.startswith("feedback/") and (tmp_path / f.removeprefix("feedback/")).read_text().startswith(
            f"Feedback for {s} (")


def test_folder_names_that_mimic_an_escaped_name_or_overflow_a_file_name_keep_their_own_rows(tmp_path):
    """A folder that is not UTF-8 (b'bad\\xffname') is shown escaped with a hash of its bytes; a classmate's folder
    named exactly that took its row (the gradebook's key) and the two merged into one. A folder name of 250 bytes
    made a feedback file name over 255: the whole run stopped with a traceback, and nobody got feedback."""
    import hashlib

    klass = tmp_path / "class"
    klass.mkdir()
    raw = b"bad\xffname"
    mimic = "bad\\xffname-" + hashlib.sha256(raw).hexdigest()[:8]
    long_name = "Jane Long Name " * 16 + "x" * 10  # 250 characters
    wrong = (ROOT / "problems" / "sdpa" / "wrong" / "additive_bool_mask.py").read_bytes()
    right = (ROOT / "solutions" / "sdpa.py").read_bytes()
    for folder, source in ((os.path.join(bytes(klass), raw), wrong), (bytes(klass / mimic), right),
                           (bytes(klass / long_name), right)):
        os.mkdir(folder)
        with open(os.path.join(folder, b"sdpa.py"), "wb") as f:
            f.write(source)
    p = grade_cli("class", "--problems", "sdpa", "--out", "out", "--workers", "1", "--device", "cpu", "--seed", "5",
                  "--feedback", "summary", home=tmp_path / "home", cwd=tmp_path)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stdout + p.stderr
    sheet = grades(tmp_path / "out")
    assert len(sheet) == 3, sheet
    assert sheet[(mimic, "sdpa")]["verdict"] == "accepted" and sheet[(long_name, "sdpa")]["verdict"] == "accepted"
    (escaped,) = [s for s, _ in sheet if s not in (mimic, long_name)]
    assert escaped.startswith("bad\\xffname-") and sheet[(escaped, "sdpa")]["verdict"] == "wrong_answer", sheet
    assert sheet[(escaped, "sdpa")]["sha256"] == hashlib.sha256(wrong).hexdigest()
    given = json.loads((tmp_path / "out" / "grades.json").read_text())["feedback_files"]
    assert sorted(given) == sorted([escaped, mimic, long_name]), given
    for student, f in given.items():
        path = tmp_path / "out" / f
        assert len(path.name.encode()) <= 255 and path.read_text().startswith(f"Feedback for {student} ("), f
    rerun = grade_cli("class", "--problems", "sdpa", "--out", "out", "--workers", "1", "--device", "cpu", "--seed", "5",
                      "--feedback", "summary", home=tmp_path / "home", cwd=tmp_path)
    assert rerun.returncode == 0 and grades(tmp_path / "out") == sheet, rerun.stdout + rerun.stderr  # names are stable


def test_a_hostile_zip_skips_what_it_cannot_unpack_and_grades_the_rest(tmp_path):
    """Members that cannot be unpacked (a name that is a file and a folder, a corrupt member) are listed
    as skipped; the class is graded, never a traceback."""
    archive = tmp_path / "class.zip"
    right = (CLASS / "alice" / "sdpa.py").read_bytes()
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("alice/sdpa.py", right)
        z.writestr("bob", b"a file")
        z.writestr("bob/sdpa.py", right)  # bob is a file already
        z.writestr("carol/sdpa.py", right)
        z.writestr("carol", b"and now a file")  # carol is a folder already
        z.writestr("dave/sdpa.py", right * 3)
    data = bytearray(archive.read_bytes())
    at = data.index(b"dave/sdpa.py") + len(b"dave/sdpa.py") + 10  # inside dave's compressed bytes
    data[at:at + 4] = bytes(b ^ 0xFF for b in data[at:at + 4])
    archive.write_bytes(bytes(data))
    p = grade_cli(str(archive), "--problems", "sdpa", "--out", "out", "--workers", "1", "--device", "cpu",
                  home=tmp_path / "home", cwd=tmp_path)
    out = p.stdout + p.stderr
    assert p.returncode == 0 and "Traceback" not in out, out
    assert "bob/sdpa.py: cannot be unpacked" in out and "carol: cannot be unpacked" in out, out
    assert "dave/sdpa.py: cannot be read from the zip" in out, out
    sheet = grades(tmp_path / "out")
    assert sheet[("alice", "sdpa")]["verdict"] == expected_verdict(CLASS / "alice" / "sdpa.py")
    assert sheet[("carol", "sdpa")]["verdict"] == expected_verdict(CLASS / "alice" / "sdpa.py")


@pytest.mark.skipif(not CONFINABLE, reason="needs Landlock and seccomp (Linux)")
def test_a_student_cannot_change_the_modes_or_times_of_the_class_files(tmp_path):
    """Landlock has no right for chmod, chown or utime: aaron's chmod 000 of the class folder and of bob's file
    failed bob and carol (runtime_error: cannot read your file), and the rerun kept those rows."""
    klass = tmp_path / "class"
    for student in ("aaron", "bob", "carol"):
        (klass / student).mkdir(parents=True)
        shutil.copy(CLASS / "alice" / "sdpa.py", klass / student / "sdpa.py")
    hostile = """import os
here = os.path.dirname(os.path.abspath(__file__))
for path, change in ((os.path.dirname(here), lambda p: os.chmod(p, 0)),
                     (os.path.join(here, "..", "bob", "sdpa.py"), lambda p: os.chmod(p, 0)),
                     (os.path.join(here, "..", "carol", "sdpa.py"), lambda p: os.utime(p, (0, 0))),
                     (__file__, lambda p: os.utime(p))):
    try:
        change(path)
        print("changed", path)
    except OSError as e:
        print("refused", e.errno)
"""
    aaron = klass / "aaron" / "sdpa.py"
    aaron.write_text(hostile + aaron.read_text())
    before = {p: (p.stat().st_mode, p.stat().st_mtime_ns) for p in [klass, *klass.rglob("*")]}
    p = grade_cli("class", "--problems", "sdpa", "--out", "out", "--workers", "1", "--device", "cpu",
                  "--feedback", "full", home=tmp_path / "home", cwd=tmp_path)
    after = {q: (q.stat().st_mode, q.stat().st_mtime_ns) for q in before}
    assert after == before
    assert p.returncode == 0, p.stdout + p.stderr
    sheet = grades(tmp_path / "out")
    assert [sheet[(s, "sdpa")]["verdict"] for s in ("aaron", "bob", "carol")] == ["accepted"] * 3, sheet


def test_a_class_seed_is_built_ahead_but_never_reused_for_a_hidden_one():
    """A session grading a class (one seed given every time) builds the next grade's cases for that seed;
    a later grade that asks for a hidden seed never gets the one the caller knows."""
    from torchcode.grader.limits import Limits
    from torchcode.session import Session

    sdpa = CLASS / "alice" / "sdpa.py"
    with Session(limits=Limits(device="cpu")) as s:
        first = s.grade("sdpa", path=sdpa, seed=1234)
        time.sleep(0.5)  # the head start, built for seed 1234
        second = s.grade("sdpa", path=CLASS / "bob" / "sdpa.py", seed=1234)
        hidden = s.grade("sdpa", path=sdpa)
        other = s.grade("sdpa", path=sdpa, seed=99)
    assert first.seed == second.seed == 1234 and first.passed and second.verdict.value == "wrong_answer"
    assert hidden.seed != 1234 and hidden.passed
    assert other.seed == 99 and other.passed


def test_grade_bench_says_once_that_a_problem_has_no_benchmark(tmp_path):
    klass = tmp_path / "class"
    for student in ("ann", "ben", "cat"):
        (klass / student).mkdir(parents=True)
        shutil.copy(ROOT / "solutions" / "mha.py", klass / student / "mha.py")
    p = grade_cli("class", "--problems", "mha", "--out", "out", "--workers", "1", "--device", "cpu", "--bench",
                  home=tmp_path / "home", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.count("not timed") == 1, p.stdout
    assert "not timed: 3 submissions of mha (ann, ben, cat): mha has no benchmark" in " ".join(p.stdout.split()), p.stdout


def test_a_file_every_student_has_that_is_no_known_problem_suggests_the_pack():
    """A pack's problem graded without --problems-dir was called a helper module, in silence."""
    from torchcode.classroom.run import _grouped

    why = "not a problem being graded (a module the student's files may import)"
    lines = _grouped([f"{s}/masked_mean.py: {why}" for s in ("ann", "ben", "cat")] + [f"ann/utils.py: {why}"])
    assert lines[0] == ("masked_mean.py in 3 student folders (ann, ben, cat): " + why + "; if masked_mean is a problem "
                        "of a pack, add --problems-dir PACK (or export TORCHCODE_PROBLEMS=PACK)"), lines
    assert lines[1] == f"ann/utils.py: {why}"  # one student's own helper: nothing to suggest


def test_a_rerun_without_the_pack_of_an_earlier_run_is_refused_before_it_rewrites_the_grades(tmp_path):
    """The rerun without --problems-dir wrote grades.csv and the feedback again with the pack's problem left out
    (exit 0, one line among the skipped files)."""
    pack = FIXTURES / "course_pack"
    klass = tmp_path / "class"
    for student in ("ann", "ben"):
        (klass / student).mkdir(parents=True)
        shutil.copy(pack / "solutions" / "good_attention.py", klass / student / "good_attention.py")
        shutil.copy(ROOT / "solutions" / "sdpa.py", klass / student / "sdpa.py")
    p = grade_cli("class", "--out", "out", "--workers", "1", "--device", "cpu", "--problems-dir", str(pack),
                  home=tmp_path / "home", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    before = (tmp_path / "out" / "grades.csv").read_text()
    assert "good_attention" in before
    p = grade_cli("class", "--out", "out", "--workers", "1", "--device", "cpu", home=tmp_path / "home", cwd=tmp_path)
    said = " ".join(p.stderr.split())
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stdout + p.stderr
    assert "out holds grades for good_attention, which no problem pack given here has: add --problems-dir PACK" in said
    assert (tmp_path / "out" / "grades.csv").read_text() == before  # nothing rewritten

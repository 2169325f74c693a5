"""A new user's bad input, through the real CLI: a clear message that says what to do, the right exit code, nothing
lost or recorded by mistake. Found by walking the README as a new user (files, state, instructor commands)."""

from __future__ import annotations

import json
import sqlite3

import pytest

from torchcode.errors import StoreError
from torchcode.progress import Store


def _attempts(cli, problem: str) -> list:
    run = cli("history", problem, "--json")
    assert run.code == 0, run.text
    return json.loads(run.out)["attempts"]


@pytest.mark.parametrize("name", ["my kernel é.py"])  # quoted in the chmod line it gives
def test_an_unreadable_file_is_the_users_to_fix_not_a_verdict(cli, workdir, name):
    """chmod 000 on the file: it was graded as 'Runtime error' and recorded (as root: the worker gives up root's
    powers, so it cannot read it) or ended in a PermissionError traceback (as anyone else). Now: exit 2, what to
    run, nothing recorded; check, watch and bench alike."""
    f = workdir / name
    f.write_text("def scaled_dot_product_attention(Q, K, V, mask=None):\n    return Q\n")
    f.chmod(0)
    try:
        for command in ("check", "watch", "bench"):
            run = cli(command, name, "--problem", "sdpa", "--device", "cpu")
            assert run.code == 2, run.text
            assert f"cannot read {name}: Permission denied" in run.err and "chmod u+r" in run.err, run.err
            assert f"then {command} it again" in run.err and "Traceback" not in run.text
    finally:
        f.chmod(0o644)
    assert _attempts(cli, "sdpa") == []


def test_a_missing_package_is_named_and_said_not_available_in_the_grader(grader, catalog, tmp_path):
    """The shared grader (a CLI check renders the same message): a package the grader's Python lacks is named and
    said unavailable there; a missing submodule of a package it has (`torch.nope`) is not called a missing package."""
    f = tmp_path / "sdpa.py"
    f.write_text("import torch\nfrom einops_not_installed import rearrange\n\n\n"
                 "def scaled_dot_product_attention(Q, K, V, mask=None):\n    return Q\n")
    report = grader.grade(catalog.get("sdpa"), f)
    assert report.verdict.value == "runtime_error", report.message
    assert "No module named 'einops_not_installed'" in report.message, report.message
    assert "The package `einops_not_installed` is not available in the grader" in report.message
    assert "Write it with torch" in report.message
    f.write_text("import torch.nope_not_a_submodule\n")
    report = grader.grade(catalog.get("sdpa"), f)
    assert "No module named 'torch.nope_not_a_submodule'" in report.message, report.message
    assert "not available in the grader" not in report.message


@pytest.mark.parametrize("pid, words", [("class", "is a Python keyword"), ("lambda", "is a Python keyword"),
                                        ("torch", "a name the scaffold's code imports")])
def test_new_refuses_an_id_its_function_scaffold_cannot_use(cli, workdir, pid, words):
    """`new class` wrote `def class(Q, K, V)` and said 'It validates as written'; `new torch` wrote a reference whose
    torch.softmax was the function itself."""
    run = cli("new", pid, "--kind", "function", "--dir", "pack")
    assert run.code == 2 and words in run.err and f"{pid}_attention" in run.err, run.text
    assert not (workdir / "pack").exists()


def test_a_store_locked_past_the_wait_says_who_holds_it_not_to_move_the_folder(tmp_path):
    """Another program holding the progress store's write lock (a database browser with unsaved changes): the
    check's warning said 'Set TORCHCODE_HOME to a writable folder', which fixes nothing."""
    path = tmp_path / "progress.sqlite3"
    Store(path).mark_started(tmp_path, "sdpa", tmp_path / "sdpa.py")  # a real store with one row
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        st = Store(path)
        st.busy_timeout_s = 0.2
        with pytest.raises(StoreError) as caught:
            st.reveal_hint("sdpa", 3)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    msg = str(caught.value)
    assert "is locked" in msg and "another program has held it for over 0.2 s" in msg and "Close that program" in msg
    assert "TORCHCODE_HOME" not in msg
    assert Store(path).reveal_hint("sdpa", 3) == 1  # once it is let go, the same write goes through


def test_a_store_that_cannot_be_opened_says_what_to_do(cli, workdir, torchcode_home):
    (torchcode_home / "progress.sqlite3").mkdir(parents=True)  # cannot be opened as a file, even by root
    run = cli("hint", "sdpa")
    assert run.code == 0 and "Hint 1 of" in run.out, run.text  # the hint is shown all the same
    assert "could not be recorded" in run.err and "set TORCHCODE_HOME to a writable folder" in run.err, run.err


def test_grade_says_where_the_files_are_when_the_layout_is_off(cli, workdir):
    """One student's folder given as the class, or sections holding the students' folders (the same student name in
    two sections): 'no submissions' alone left the instructor guessing."""
    stub = "def scaled_dot_product_attention(Q, K, V, mask=None):\n    return Q\n"
    for student in ("alice", "sec1/bob", "sec2/bob"):
        (workdir / "class" / student).mkdir(parents=True)
        (workdir / "class" / student / "sdpa.py").write_text(stub)
    run = cli("grade", "class/alice", "--out", "out", "--device", "cpu")
    assert run.code == 2, run.text
    assert "class/alice itself holds sdpa.py: it looks like one student's files" in run.err, run.err
    assert "`torchcode grade class`" in run.err
    (workdir / "class" / "alice" / "sdpa.py").unlink()
    run = cli("grade", "class", "--out", "out", "--device", "cpu")
    assert run.code == 2, run.text
    assert "one folder deeper, in sec1/, sec2/" in run.err, run.err
    assert "`torchcode grade class/sec1 --out grades-sec1` and `torchcode grade class/sec2 --out grades-sec2`" in run.err
    assert not (workdir / "out").exists()
    # one readable submission and one that cannot be read (a PermissionError traceback, or as root a 'Runtime
    # error' verdict): the first graded on one warm session, not one per core (--workers 2 asked); the second
    # not_graded (no score, exit 1, a rerun grades it), never 'missing'
    (workdir / "class" / "sec1" / "dan").mkdir()
    (workdir / "class" / "sec1" / "dan" / "sdpa.py").write_text(stub)
    (workdir / "class" / "sec1" / "dan" / "sdpa.py").chmod(0)
    run = cli("grade", "class/sec1", "--out", "out", "--workers", "2", "--device", "cpu")
    assert run.code == 1 and "1 to grade on 1 local worker (cpu)" in run.out and "Traceback" not in run.text, run.text
    assert "not graded: dan/sdpa.py: the file cannot be read (Permission denied): make it readable" in " ".join(
        run.out.split()), run.out
    results = {r["student"]: r for r in json.loads((workdir / "out" / "grades.json").read_text())["results"]}
    assert results["bob"]["verdict"] in ("wrong_answer", "wrong_output")
    assert results["dan"]["verdict"] == "not_graded" and results["dan"]["score"] == "", results["dan"]


def test_a_session_refuses_an_unreadable_file_before_grading(tmp_path):
    """serve and watch grade through a session: the same message, before any process starts."""
    from torchcode.errors import Unreadable
    from torchcode.session import Session

    f = tmp_path / "sdpa.py"
    f.write_text("x = 1\n")
    f.chmod(0)
    s = Session()
    with pytest.raises(Unreadable, match="cannot read .*sdpa.py: Permission denied.*chmod u\\+r"):
        s.grade("sdpa", path=f)
    assert not s.running


def test_reset_of_the_untouched_stub_keeps_no_backup_of_it(cli, workdir):
    assert cli("start", "sdpa").code == 0
    run = cli("reset")
    assert run.code == 0 and "sdpa.py is the stub already: nothing to restore." in run.out, run.text
    assert sorted(p.name for p in workdir.iterdir()) == ["sdpa.py"]
    (workdir / "sdpa.py").write_text((workdir / "sdpa.py").read_text() + "# mine\n")  # changed: kept, and said
    run = cli("reset")
    backups = list(workdir.glob("sdpa.py.bak-*"))
    assert len(backups) == 1 and f"kept as {backups[0].name}" in run.out and "# mine" in backups[0].read_text()


def test_a_pipe_or_a_device_is_not_called_missing(cli, workdir):
    import os

    os.mkfifo(workdir / "sdpa.py")  # reading it would wait forever
    for target in ("sdpa.py", "/dev/null"):
        run = cli("check", target, "--problem", "sdpa")
        assert run.code == 2 and f"{target} is not a regular file (a pipe or a device)" in run.err, run.text


def test_a_nul_byte_names_its_line(grader, catalog, tmp_path):
    """compile() says 'source code string cannot contain null bytes', shown as 'None:None: ...'."""
    f = tmp_path / "sdpa.py"
    f.write_bytes(b"import torch\n\nx = 1\x00\n")
    report = grader.grade(catalog.get("sdpa"), f)
    assert report.verdict.value == "syntax_error"
    assert report.message.startswith("your file contains a NUL byte (line 3)") and "None" not in report.message


def test_a_zip_with_utf8_names_but_no_utf8_flag_keeps_the_students_names(tmp_path, monkeypatch):
    """macOS's Archive Utility and many LMS exports write UTF-8 names without the zip's UTF-8 flag: read as the
    format's CP437 they made 'Jos├⌐' of José in grades.csv and the feedback files. Discovery alone (no grading)."""
    import zipfile

    from torchcode.classroom.discover import discover

    archive = tmp_path / "class.zip"
    with monkeypatch.context() as m:  # how such a tool writes a name: its UTF-8 bytes, flag bit 11 left clear
        m.setattr(zipfile.ZipInfo, "_encodeFilenameFlags",
                  lambda self: (self.filename.encode("utf-8"), self.flag_bits & ~0x800))
        with zipfile.ZipFile(archive, "w") as z:
            for name in ("José/sdpa.py", "Zoë Müller/sdpa.py", "李/sdpa.py", "plain/sdpa.py"):
                z.writestr(zipfile.ZipInfo(name), "x = 1\n")
    assert {i.flag_bits & 0x800 for i in zipfile.ZipFile(archive).infolist()} == {0}
    found = discover(archive, ["sdpa"], tmp_path / "unpacked")
    assert sorted(s.student for s in found.submissions) == sorted(["José", "Zoë Müller", "李", "plain"])


@pytest.mark.parametrize("args, words", [
    (["--out", "notes.txt"], "--out notes.txt is a file: name a folder"),
    (["--out", "class"], "--out class is the submissions folder itself"),  # a rerun took feedback/ for a student
    (["--out", "class/alice"], "--out class/alice is inside the student folder alice/"),  # alice was left ungraded
    (["--out", "class/alice/grades"], "--out class/alice/grades is inside the student folder alice/"),
    (["--out", "grades", "--problems", ""], "--problems names no problem"),  # said 'PROBLEM.py files for  (...'
])
def test_grade_refuses_an_out_among_the_students_files(cli, workdir, args, words):
    for student in ("alice", "bob"):
        (workdir / "class" / student).mkdir(parents=True)
        (workdir / "class" / student / "sdpa.py").write_text("x = 1\n")
    (workdir / "notes.txt").write_text("my notes\n")
    run = cli("grade", "class", *args, "--device", "cpu")
    assert run.code == 2 and words in run.err and "Traceback" not in run.err, run.text
    assert sorted(p.name for p in (workdir / "class").iterdir()) == ["alice", "bob"]
    assert [p.name for p in (workdir / "class" / "alice").iterdir()] == ["sdpa.py"]
    assert (workdir / "notes.txt").read_text() == "my notes\n"


def test_an_out_that_links_to_the_only_students_folder_is_said_so(cli, workdir):
    """--out through a link into the one student's folder took that student: "no submissions in class"."""
    (workdir / "class" / "zed").mkdir(parents=True)
    (workdir / "class" / "zed" / "sdpa.py").write_text("x = 1\n")
    (workdir / "class" / "grades").symlink_to(workdir / "class" / "zed")
    run = cli("grade", "class", "--out", "class/grades", "--device", "cpu")
    assert run.code == 2 and "--out class/grades is inside the student folder zed/" in run.err, run.text
    assert [p.name for p in (workdir / "class" / "zed").iterdir()] == ["sdpa.py"]


def test_a_student_folder_with_a_file_named_like_the_gradebook_is_still_no_out(cli, workdir):
    """A student's folder holding their own gradebook.sqlite3 was taken for a grades folder: --out there mixed the
    class's grades into that student's files."""
    for student in ("alice", "bob"):
        (workdir / "class" / student).mkdir(parents=True)
        (workdir / "class" / student / "sdpa.py").write_text("x = 1\n")
    (workdir / "class" / "alice" / "gradebook.sqlite3").write_bytes(b"mine")
    run = cli("grade", "class", "--out", "class/alice", "--device", "cpu")
    assert run.code == 2 and "inside the student folder alice/" in run.err and "Traceback" not in run.err, run.text
    assert (workdir / "class" / "alice" / "gradebook.sqlite3").read_bytes() == b"mine"


@pytest.mark.parametrize("text", ["", "\n\n   \n"])
def test_an_empty_file_is_called_empty(grader, catalog, tmp_path, text):
    f = tmp_path / "sdpa.py"
    f.write_text(text)
    report = grader.grade(catalog.get("sdpa"), f)
    assert report.verdict.value == "bad_interface"
    assert report.message.startswith("your file is empty: it must define `scaled_dot_product_attention`"), report.message
    f.write_text("# only a comment\ndef helper():\n    pass\n")  # not empty: what it defines is named
    assert grader.grade(catalog.get("sdpa"), f).message == "your file does not define `scaled_dot_product_attention` (it defines: helper)"


@pytest.mark.parametrize("args, words", [
    (["new", "abc", "--kind", "function", "--dir", "notes.txt"], "--dir notes.txt is a file: name the pack's folder"),
    (["start", "sdpa", "-o", "notes.txt/sdpa.py"], "cannot write notes.txt/sdpa.py: notes.txt is a file, not a folder"),
    (["validate", "sdpa", "--seeds", "0"], "--seeds must be at least 1"),  # taken as 1, silently
])
def test_a_file_where_a_folder_goes_and_a_zero_count_are_said(cli, workdir, args, words):
    """`new --dir FILE` ended in a NotADirectoryError traceback; `start -o FILE/x.py` said 'File exists'."""
    (workdir / "notes.txt").write_text("my notes\n")
    run = cli(*args)
    assert run.code == 2 and words in run.err and "Traceback" not in run.err, run.text
    assert sorted(p.name for p in workdir.iterdir()) == ["notes.txt"] and (workdir / "notes.txt").read_text() == "my notes\n"


@pytest.mark.parametrize("args", [["check", "--json"], ["start", "gqa"], ["reset"]])
def test_a_current_folder_deleted_under_the_shell_is_said(cli, workdir, args):
    """The folder the shell is in was deleted (a temp folder cleaned, a branch switched): a FileNotFoundError
    traceback from os.getcwd()."""
    gone = workdir / "gone"
    gone.mkdir()
    import os

    run = cli(*args, cwd=gone, preexec_fn=lambda: os.rmdir(os.getcwd()))
    assert run.code == 2 and "Traceback" not in run.err, run.text
    assert "error: the current folder no longer exists" in run.err and "`cd` to a folder that exists" in run.err
    if "--json" in args:
        assert json.loads(run.out)["exit_code"] == 2


def test_the_started_file_deleted_is_said_not_called_unreadable(cli, workdir):
    """After `start`, the file was deleted: `check` said 'cannot read sdpa.py: No such file or directory. Make it
    readable (chmod u+r ...)'; `watch sdpa` said 'no file sdpa.py to check'."""
    assert cli("start", "sdpa").code == 0
    (workdir / "sdpa.py").unlink()
    for command in ("check", "watch"):
        run = cli(command)
        assert run.code == 2 and f"no file sdpa.py to {command}: it was deleted or moved" in run.err, run.text
        assert "torchcode reset sdpa" in run.err and "chmod" not in run.err
    run = cli("watch", "sdpa")
    assert run.code == 2 and "no file sdpa.py to watch" in run.err, run.text
    (workdir / "sdpa.py").symlink_to(workdir / "nowhere.py")  # a dangling link
    run = cli("check")
    assert run.code == 2 and "no such file: sdpa.py" in run.err and "chmod" not in run.err, run.text
    assert _attempts(cli, "sdpa") == []


def test_an_earlier_out_among_the_students_is_not_a_student(tmp_path):
    """`grade class --out class/grades`, then `grade class --out elsewhere`: grades/ was a student, 'missing' every
    problem with a score of 0. Discovery alone (no grading)."""
    from torchcode.classroom.discover import discover

    (tmp_path / "class" / "alice").mkdir(parents=True)
    (tmp_path / "class" / "alice" / "sdpa.py").write_text("x = 1\n")
    (tmp_path / "class" / "grades" / "feedback").mkdir(parents=True)
    from torchcode.classroom.gradebook import Gradebook

    Gradebook(tmp_path / "class" / "grades").close()  # what `grade --out class/grades` wrote
    found = discover(tmp_path / "class", ["sdpa"], tmp_path / "unpacked", skip=tmp_path / "elsewhere")
    assert found.students == ["alice"], found.students
    assert "grades/: an earlier `torchcode grade` output (--out), not a student" in found.unknown


def test_history_says_a_source_over_1_mb_was_not_kept(cli, grader, catalog, workdir):
    """A 1.5 MB file (a kernel and a pasted data table) is graded and recorded, its text not kept: `history --show`
    gave only 'an older torchcode, or the file changed while it was checked' as the reasons."""
    from torchcode.progress.record import record_report

    f = workdir / "sdpa.py"
    f.write_text(("# " + "x" * 98 + "\n") * 15_000 + "x = 1\n")
    record_report(Store(), grader.grade(catalog.get("sdpa"), f), f)
    run = cli("history", "sdpa", "--show", "1")
    assert run.code == 2 and "or it was larger than 1 MB" in run.err, run.text


def test_a_student_folder_that_cannot_be_read_is_said_not_a_traceback(tmp_path):
    """chmod 000 on a student's folder: a PermissionError traceback (or, as root, every file of it graded 'Runtime
    error': the worker could not enter it). Discovery alone (no grading)."""
    from torchcode.classroom.discover import discover

    for student in ("alice", "bob"):
        (tmp_path / "class" / student).mkdir(parents=True)
        (tmp_path / "class" / student / "sdpa.py").write_text("x = 1\n")
    (tmp_path / "class" / "bob").chmod(0)
    try:
        found = discover(tmp_path / "class", ["sdpa"], tmp_path / "unpacked")
    finally:
        (tmp_path / "class" / "bob").chmod(0o755)
    assert found.students == ["alice"] and [s.student for s in found.submissions] == ["alice"]
    assert "bob/: cannot be read (Permission denied): not graded; make it readable (chmod u+rx) and run again" \
        in found.unknown, found.unknown

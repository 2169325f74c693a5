"""The warm grading session (torchcode.session): the engine of watch, Jupyter, serve and grade.

Real session processes, real sandboxed workers; the caller never imports torch.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from conftest import ROOT, expected_verdict
from test_hostile import CONFINABLE, HOSTILE, problem_of
from torchcode.errors import GraderError, UsageError
from torchcode.grader.limits import Limits
from torchcode.session import Cancelled, Session

GQA = ROOT / "solutions" / "gqa.py"
RETURNS_Q = "def gqa(Q, K, V, n_kv_heads):\n    return Q\n"
ENDLESS = "def scaled_dot_product_attention(Q, K, V, mask=None):\n    while True:\n        pass\n"


@pytest.fixture(scope="module")
def session():
    with Session(limits=Limits(device="cpu", time_limit=1)) as s:  # as test_hostile grades the corpus
        yield s


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


def test_grades_a_file_and_a_text_with_progress_events(session):
    events: list[dict] = []
    report = session.grade("gqa", path=GQA, on_event=events.append)
    assert report.passed and report.cases_passed == len(report.cases) > 3
    assert report.problem == "gqa" and report.device == "cpu" and report.file == str(GQA)
    # started, then each case announced before it is decided, then the replays
    assert events[0]["event"] == "started" and events[0]["seed"] == report.seed
    assert sorted(events[0]["cases"]) == sorted(c.name for c in report.cases)
    runs = [e for e in events[1:] if not e["replay"]]
    assert [e["event"] for e in runs] == ["case", "case_done"] * len(report.cases)
    assert {e["name"] for e in runs} == {c.name for c in report.cases}
    assert any(e.get("replay") for e in events)

    wrong = session.grade("gqa", source=RETURNS_Q, seed=report.seed)
    assert wrong.verdict.value in ("wrong_answer", "wrong_output", "bad_interface") and not wrong.passed
    assert wrong.seed == report.seed and wrong.message


def test_same_report_as_check(session, cli, tmp_path):
    """The session's report is the one `check --json` prints, for the same seed."""
    f = tmp_path / "gqa.py"
    f.write_text(GQA.read_text())
    r = cli("check", str(f), "--problem", "gqa", "--device", "cpu", "--json", "--seed", "77")
    via_cli = json.loads(r.out)
    via_session = session.grade("gqa", path=f, seed=77).to_dict()
    for key in ("verdict", "seed", "sha256", "cases_passed", "cases_total", "dtypes", "device"):
        assert via_session[key] == via_cli[key], key
    assert [c["name"] for c in via_session["cases"]] == [c["name"] for c in via_cli["cases"]]


def test_the_caller_never_imports_torch(tmp_path):
    code = textwrap.dedent(f"""
        import sys
        from torchcode.session import Session
        with Session(limits=__import__("torchcode.grader.limits").grader.limits.Limits(device="cpu")) as s:
            r = s.grade("gqa", path={str(GQA)!r})
        print(r.verdict.value, "torch" in sys.modules)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180)
    assert out.stdout.split() == ["accepted", "False"], out.stderr


def test_bad_requests_are_usage_errors_and_the_session_goes_on(session, tmp_path):
    with pytest.raises(UsageError, match="no problem named 'nosuch'"):
        session.grade("nosuch", source="x = 1\n")
    with pytest.raises(UsageError, match="no such file"):
        session.grade("gqa", path=tmp_path / "missing.py")
    with pytest.raises(UsageError):
        session.grade("gqa")
    with pytest.raises(UsageError, match="cannot be graded"):  # a lone surrogate: no file can hold it
        session.grade("gqa", source="x = '\ud800'\n")
    assert session.grade("gqa", path=GQA).passed
    assert session.grade("gqa", source=GQA.read_text()).passed  # the text file is written afresh


def test_syntax_errors_and_half_written_files_are_verdicts(session):
    half = session.grade("gqa", source=GQA.read_text()[: len(GQA.read_text()) // 2])
    assert not half.passed and half.message
    assert session.grade("gqa", source=GQA.read_text() + "\ndef broken(:\n").verdict.value == "syntax_error"
    assert session.grade("gqa", source="").verdict.value == "bad_interface"
    assert session.grade("gqa", path=GQA).passed


def test_cancel_stops_the_grade_in_flight(session):
    pid = session._proc.pid
    box: dict = {}

    def run():
        try:
            box["report"] = session.grade("sdpa", source=ENDLESS)
        except Cancelled as e:
            box["cancelled"] = e

    t = threading.Thread(target=run)
    start = time.monotonic()
    t.start()
    while not session._busy:
        time.sleep(0.01)
    time.sleep(1.0)  # the worker is in the endless loop by now
    session.cancel()
    t.join(30)
    assert "cancelled" in box and time.monotonic() - start < 10
    assert session._proc.pid == pid  # the same warm process goes on
    deadline = time.monotonic() + 5
    while len(_children(pid)) > 1 and time.monotonic() < deadline:  # only the zygote is left
        time.sleep(0.05)
    zygote = _children(pid)
    assert len(zygote) == 1 and _children(zygote[0]) == []
    assert session.grade("gqa", path=GQA).passed


def test_concurrent_callers_take_turns(session):
    results: list = [None] * 4

    def run(i):
        results[i] = session.grade("gqa", path=GQA) if i % 2 else session.grade("gqa", source=RETURNS_Q)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert [r.passed for r in results] == [False, True, False, True]


def test_a_dead_session_process_is_a_grader_error_then_restarts(tmp_path):
    with Session(limits=Limits(device="cpu")) as s:
        first = s._proc.pid
        os.kill(first, signal.SIGKILL)
        s._proc.wait(10)
        assert s.grade("gqa", path=GQA).passed  # between grades: restarted, nothing to report
        box: dict = {}

        def run():
            try:
                s.grade("sdpa", source=ENDLESS)
            except GraderError as e:
                box["error"] = e

        t = threading.Thread(target=run)
        t.start()
        while not s._busy:
            time.sleep(0.01)
        time.sleep(0.5)
        os.kill(s._proc.pid, signal.SIGKILL)  # mid-grade: said, never a verdict
        t.join(30)
        assert "grading session's process ended" in str(box.get("error"))
        assert s.grade("gqa", path=GQA).passed
        assert s._proc.pid != first


def test_a_session_killed_while_it_starts_leaves_no_folder(tmp_path, monkeypatch):
    """Killed before it said where its temporary folder was (its zygote starting, as a Ctrl-C that is not
    answered in time ends it): the folder, made by the caller, goes too (watch's Ctrl-C test left it under load)."""
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    s = Session(limits=Limits(device="cpu"))
    box: dict = {}

    def start():
        try:
            s.start()
        except GraderError as e:
            box["error"] = e

    t = threading.Thread(target=start)
    t.start()
    deadline = time.monotonic() + 60
    while not (s._proc is not None and list(tmp_path.glob("tmp*"))) and time.monotonic() < deadline:
        time.sleep(0.005)
    assert s._proc is not None and s.device is None, "it was ready before it was killed"
    os.kill(s._proc.pid, signal.SIGKILL)
    t.join(30)
    s.close()
    assert "error" in box and list(tmp_path.iterdir()) == []


def test_close_and_a_dying_caller_leave_nothing(tmp_path):
    """The caller killed mid-grade: the session's process, its zygote and the worker all go."""
    code = textwrap.dedent(f"""
        import os, sys
        from torchcode.session import Session
        from torchcode.grader.limits import Limits
        s = Session(limits=Limits(device="cpu", time_limit=60, total_limit=120)).start()
        print(s._proc.pid, flush=True)
        s.grade("sdpa", source={ENDLESS!r})
    """)
    caller = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    server = int(caller.stdout.readline())
    time.sleep(1.5)
    zygote = _children(server)
    assert zygote and _children(zygote[0]), "a worker should be running"
    worker = _children(zygote[0])[0]
    caller.kill()
    caller.wait()
    deadline = time.monotonic() + 10
    alive = [p for p in (server, *zygote, worker) if Path(f"/proc/{p}").exists()]
    while alive and time.monotonic() < deadline:
        time.sleep(0.1)
        alive = [p for p in alive if Path(f"/proc/{p}").exists() and "Z" not in _state(p)]
    assert not alive


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"


@pytest.mark.parametrize("path", HOSTILE, ids=[p.stem for p in HOSTILE])
def test_hostile_submissions_through_a_warm_session(session, path):
    """The hostile corpus, graded one after another by one warm session: the intended verdict each
    time, and the session is still healthy (its process is the same and answers the next grade)."""
    text = path.read_text()
    if "# needs: confinement" in text and not CONFINABLE:
        pytest.skip("this kernel has no Landlock/seccomp")
    if re.search(r"^# args: ", text, re.M):
        pytest.skip("graded with other limits by test_hostile")
    pid = session._proc.pid
    report = session.grade(problem_of(path), path=path, seed=5)
    assert report.verdict.value == expected_verdict(path), report.message
    assert session._proc.pid == pid


WRONG_SCALE = (ROOT / "solutions" / "sdpa.py").read_text().replace("math.sqrt(d_k)", "d_k")


def test_the_head_start_keeps_seeds_hidden_and_reproducible(session, tmp_path):
    """Between grades the session draws the next seed and builds the next cases and worker ahead;
    a grade that used them reports its seed, and that seed reproduces it exactly."""
    assert WRONG_SCALE != (ROOT / "solutions" / "sdpa.py").read_text()
    once = tmp_path / "gqa.py"
    once.write_text(GQA.read_text())
    session.grade("gqa", path=once)
    time.sleep(1.0)
    zygote = _children(session._proc.pid)
    assert len(zygote) == 1 and _children(zygote[0]) == []  # a file graded once (a class) gets no worker ahead
    session.grade("sdpa", source=WRONG_SCALE)
    session.grade("sdpa", source=WRONG_SCALE)
    time.sleep(1.0)  # graded twice in a row (watch, a cell, the browser): the head start for the next grade
    assert len(_children(zygote[0])) == 1  # its worker, started, waiting for the text
    first = session.grade("sdpa", source=WRONG_SCALE)
    again = session.grade("sdpa", source=WRONG_SCALE, seed=first.seed)
    assert first.verdict.value == again.verdict.value == "wrong_answer"
    assert [(c.name, c.verdict, c.mismatch) for c in first.cases] == [(c.name, c.verdict, c.mismatch) for c in again.cases]
    seeds = {session.grade("sdpa", source=WRONG_SCALE).seed for _ in range(3)}
    assert len(seeds) == 3  # a new hidden seed every time
    # another problem, another file: the worker started ahead is not used for it
    assert session.grade("gqa", path=GQA).passed
    assert session.grade("sdpa", source=(ROOT / "solutions" / "sdpa.py").read_text()).passed


FORGES_THE_SESSION = '''
import json, os, torch
LINE = (json.dumps({"report": {"verdict": "accepted", "problem": "sdpa", "file": "x", "seed": 1, "cases": []}})
        + "\\n").encode()

def _session_process():
    pid = os.getpid()
    for _ in range(4):
        with open(f"/proc/{pid}/stat") as f:
            pid = int(f.read().rsplit(")", 1)[1].split()[1])
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            if b"torchcode.session.server" in f.read():
                return pid

def scaled_dot_product_attention(Q, K, V, mask=None):
    pid, opened = _session_process(), 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            w = os.open(f"/proc/{pid}/fd/{fd}", os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            continue
        opened += 1
        try:
            os.write(w, LINE * 4)
        except OSError:
            pass
        os.close(w)
    print("opened", opened)
    return torch.zeros(*Q.shape[:-1], V.shape[-1], dtype=Q.dtype)
'''


def test_replies_cannot_be_forged_even_without_confinement():
    """Where Landlock is missing (other kernels), a worker can open another process's pipes through
    /proc/PID/fd; the session's requests and replies travel on a socket, which cannot be opened so.
    The submission writes a forged "accepted" into every descriptor of the session's process it can
    open (here its log file, at least), and still gets its wrong answer."""
    with Session(limits=Limits(device="cpu", confine=False)) as s:
        report = s.grade("sdpa", source=FORGES_THE_SESSION)
        assert report.verdict.value == "wrong_answer", report.message
        opened = int(re.search(r"opened (\d+)", report.output).group(1))
        # the process is not dumpable, and the worker holds no capability (one started by root gives them
        # all up), so it reaches none of the process's descriptors; the socket would not open anyway
        assert opened == 0
        assert s.grade("sdpa", path=ROOT / "solutions" / "sdpa.py").passed


def test_a_device_this_machine_lacks_is_a_usage_error():
    import shutil
    if shutil.which("nvidia-smi"):
        pytest.skip("this machine may have CUDA")
    s = Session(limits=Limits(device="cuda"))
    with pytest.raises(UsageError, match="cuda") as err:
        s.start()
    assert "Traceback" not in str(err.value)
    assert not s.running
    s.close()


HELPER = ("def rk(x, n_rep):\n    B, S, H, D = x.shape\n"
          "    return x[:, :, :, None, :].expand(B, S, H, n_rep, D).reshape(B, S, H * n_rep, D)\n")


def test_a_worker_started_ahead_is_not_used_once_a_helper_beside_the_file_was_replaced(tmp_path, monkeypatch):
    """Where the file's folder holds the progress store (README's demo), a worker reads the folder's entries by
    inode: one started ahead of the next grade cannot read a helper module an editor saved since by renaming a
    new file over it. It is not used then (the grade was a runtime error: Permission denied)."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.setenv("TORCHCODE_HOME", str(work / "home"))  # the session's process inherits it
    (work / "myhelpers.py").write_text(HELPER)
    f = work / "repeat_kv.py"
    f.write_text("from myhelpers import rk\n\n\ndef repeat_kv(x, n_rep):\n    return rk(x, n_rep)\n")
    with Session(limits=Limits(device="cpu")) as s:
        assert s.grade("repeat_kv", path=f).passed
        assert s.grade("repeat_kv", path=f).passed  # the same file twice: the next grade's worker starts ahead
        time.sleep(2)  # ... and is confined by now
        side = work / ".myhelpers.py.swp"
        side.write_text(HELPER + "# saved again\n")
        os.replace(side, work / "myhelpers.py")
        report = s.grade("repeat_kv", path=f)
        assert report.passed, (report.verdict, report.message)


def test_a_grade_finds_its_problem_in_the_packs_it_names(session, tmp_path, monkeypatch):
    """A folder remembers the pack its problems were started from: watch, the notebook magic and serve grade them
    on a session not started with that pack, by naming it (`packs`). A pack the grade does not name is not
    searched."""
    from torchcode.errors import UsageError
    from torchcode.progress import Store
    from torchcode.web.workspace import Workspace

    pack = ROOT / "tests" / "fixtures" / "course_pack"
    solution = pack / "solutions" / "good_attention.py"
    assert session.grade("good_attention", solution, packs=[pack]).passed
    with pytest.raises(UsageError):
        session.grade("good_attention", solution)
    monkeypatch.setenv("TORCHCODE_HOME", str(tmp_path / "home"))
    Store().mark_started(tmp_path, "good_attention", tmp_path / "good_attention.py", pack)
    ws = Workspace(tmp_path)  # serve in that folder, no --problems-dir: the pack is found, and graded with
    assert "good_attention" in ws.catalog.problems and ws.problems_dirs == [pack]

"""`torchcode watch`: a real watch subprocess, real saves, real Ctrl-C.

Every save is graded and its report drawn; a half-written file (not valid Python yet) is a
verdict and the watch goes on; a deleted file is waited for; a save during a slow grade cancels
it (the newer text is graded, the older one not recorded); a case that runs long is named while
it runs; every finished grade is recorded like `check`'s; Ctrl-C (to the process, or to its
process group as a terminal sends it) ends it with exit 0, no process and no temporary file left.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT
from conftest import alive as _alive, family as _family

try:
    import watchfiles  # noqa: F401  (a core dependency: its absence is a broken install)
except ImportError:
    pytest.fail("torchcode watch needs watchfiles, a core dependency: pip install -e '.[test]'", pytrace=False)

SOLUTION = (ROOT / "solutions" / "sdpa.py").read_text()
WRONG = (ROOT / "problems" / "sdpa" / "wrong" / "scale_by_dk.py").read_text()
# A correct kernel whose first call sleeps: the case running then is named on screen.
SLOW_ONCE = SOLUTION.replace("    d_k = Q.size(-1)\n", "    import time\n    if not _slept:\n        _slept.append(1)\n"
                             "        time.sleep(2.0)\n    d_k = Q.size(-1)\n").replace("import torch\n", "import torch\n_slept = []\n", 1)
assert SLOW_ONCE.count("time.sleep") == 1
# Every call sleeps (within a case's time limit): the whole grade takes many seconds.
SLOW_EVERY = SOLUTION.replace("    d_k = Q.size(-1)\n", "    import time\n    time.sleep(1.0)\n    d_k = Q.size(-1)\n")
assert SLOW_EVERY.count("time.sleep") == 1
HEADER = re.compile(r"sdpa\.py at \d\d:\d\d:\d\d")  # heads each report
WAIT = 120.0  # seconds for one grade to show, on a loaded 2-core machine


def _torchcode() -> list[str]:
    exe = shutil.which("torchcode")
    return [exe] if exe else [sys.executable, "-m", "torchcode"]


class Watch:
    """A running `torchcode watch`, its output in files, its process family tracked."""

    def __init__(self, workdir: Path, tmp: Path, *args: str):
        self.out, self.err = tmp.parent / "watch.out", tmp.parent / "watch.err"
        env = {**os.environ, "TMPDIR": str(tmp), "NO_COLOR": "1", "COLUMNS": "200"}
        with open(self.out, "w") as out, open(self.err, "w") as err:
            self.p = subprocess.Popen(_torchcode() + ["watch", *args, "--device", "cpu"], cwd=workdir, env=env,
                                      stdout=out, stderr=err, stdin=subprocess.DEVNULL, start_new_session=True)
        self.seen: set[int] = set()
        self.header = HEADER  # what heads each report

    def text(self) -> str:
        return self.out.read_text()

    def errors(self) -> str:
        return self.err.read_text()

    def wait_for(self, what, timeout: float = WAIT) -> None:
        """Until ``what()`` is true; the process must stay up meanwhile."""
        deadline = time.monotonic() + timeout
        while not what():
            self.seen |= _family(self.p.pid)
            assert self.p.poll() is None, ("watch ended", self.p.returncode, self.text(), self.errors())
            assert time.monotonic() < deadline, ("timed out", self.text(), self.errors())
            time.sleep(0.05)
        self.seen |= _family(self.p.pid)

    def reports(self) -> int:
        return len(self.header.findall(self.text()))

    def wait_report(self, count: int) -> str:
        """The ``count``-th report (1-based), once it is fully drawn."""
        self.wait_for(lambda: self.reports() >= count and self._complete(self._nth(count)))
        return self._nth(count)

    def _nth(self, n: int) -> str:
        parts = self.header.split(self.text())
        return parts[n] if len(parts) > n else ""

    @staticmethod
    def _complete(report: str) -> bool:
        return "All hidden cases pass" in report or "reproduce with" in report or "╰" in report

    def interrupt(self, group: bool) -> tuple[int, str]:
        self.seen |= _family(self.p.pid)
        if group:
            os.killpg(self.p.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
        else:
            self.p.send_signal(signal.SIGINT)
        code = self.p.wait(timeout=60)
        return code, self.errors()

    def stop(self) -> None:
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()
        for pid in self.seen:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


@pytest.fixture
def watching(workdir, tmp_path):
    tmp = tmp_path / "tmpdir"
    tmp.mkdir()
    started: list[Watch] = []

    def start(*args: str) -> Watch:
        w = Watch(workdir, tmp, *args)
        started.append(w)
        return w

    yield start, tmp
    for w in started:
        w.stop()


def _attempts(home: Path) -> list[tuple[str, str]]:
    db = home / "progress.sqlite3"
    if not db.exists():
        return []
    return sqlite3.connect(db).execute("SELECT verdict, sha256 FROM attempts ORDER BY id").fetchall()


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _save(path: Path, text: str) -> None:
    """An editor's save: write another file and rename it over the learner's."""
    side = path.with_name(f".{path.name}.swp")
    side.write_text(text)
    os.replace(side, path)


def _assert_nothing_left(watch: Watch, tmp: Path, code: int, err: str, processes: int = 2) -> None:
    assert code == 0, (code, err)
    assert "Stopped watching." in err and "Traceback" not in err, err
    assert len(watch.seen) >= processes, "the session's processes were never seen"
    time.sleep(0.3)
    assert [pid for pid in watch.seen if _alive(pid)] == []
    assert list(tmp.iterdir()) == []


def test_every_save_is_graded_redrawn_and_recorded(cli, workdir, watching, monkeypatch):
    # the progress store inside the watched folder (as README's demo and a learner working in ~ have it): Landlock
    # then lets a worker read the learner's file alone, by inode, and a save that renames a new file over the old
    # one must not reach a worker started ahead for the old file ("Permission denied", graded as a runtime error)
    torchcode_home = workdir / "home"
    monkeypatch.setenv("TORCHCODE_HOME", str(torchcode_home))
    start, tmp = watching
    assert cli("start", "sdpa").code == 0
    target = workdir / "sdpa.py"
    w = start()  # the problem started last here
    first = w.wait_report(1)
    assert "Not implemented yet" in first and "sdpa.py" in first, first

    _save(target, WRONG)
    report = w.wait_report(2)
    assert "Wrong answer" in report and "seed" in report, report

    half = SOLUTION[:SOLUTION.index("K.transpose(-2") + len("K.transpose(-")]  # cut mid-line, as a save in progress may be seen
    target.write_text(half)
    report = w.wait_report(3)
    assert "Syntax error" in report, report

    target.unlink()  # an editor that deletes before it writes
    w.wait_for(lambda: "is gone; waiting" in w.errors())
    target.write_text(SOLUTION)
    report = w.wait_report(4)
    assert "Accepted" in report and "All hidden cases pass" in report, report

    _save(target, SOLUTION + "\n")  # a new file renamed over the one graded twice in a row
    report = w.wait_report(5)
    assert "Accepted" in report and "All hidden cases pass" in report, report

    code, err = w.interrupt(group=False)
    _assert_nothing_left(w, tmp, code, err)
    assert "Traceback" not in w.text()
    verdicts = _attempts(torchcode_home)
    assert [v for v, _ in verdicts] == ["not_implemented", "wrong_answer", "syntax_error", "accepted", "accepted"]
    assert verdicts[1][1] == _sha(WRONG) and verdicts[2][1] == _sha(half) and verdicts[3][1] == _sha(SOLUTION)
    sources = sqlite3.connect(torchcode_home / "progress.sqlite3").execute(
        "SELECT source FROM attempts ORDER BY id").fetchall()
    assert [bytes(x) for x, in sources[1:]] == [WRONG.encode(), half.encode(), SOLUTION.encode(),
                                                (SOLUTION + "\n").encode()]  # for `history`
    r = cli("status")
    assert r.code == 0 and "1 solved" in r.out, r.out


def test_a_long_case_is_named_while_it_runs(cli, workdir, watching, torchcode_home):
    start, tmp = watching
    (workdir / "sdpa.py").write_text(SLOW_ONCE)
    w = start("sdpa.py")
    w.wait_for(lambda: "running case " in w.errors())
    assert w.reports() == 0  # named before the report: while it runs
    # a second watch of the same file (another terminal) graded and recorded every save twice: refused, at once
    second = cli("watch", "sdpa", "sdpa.py", timeout=30)
    assert second.code == 2 and f"sdpa.py is already watched by another `torchcode watch` (process {w.p.pid})" \
        in second.err and "Traceback" not in second.err, second.text
    assert "Accepted" in w.wait_report(1)
    line = next(x for x in w.errors().splitlines() if x.startswith("running case "))
    assert "(float32" in line and " of " in line, line
    code, err = w.interrupt(group=True)
    _assert_nothing_left(w, tmp, code, err)
    assert [v for v, _ in _attempts(torchcode_home)] == ["accepted"]


def test_a_save_during_a_grade_cancels_it(workdir, watching, torchcode_home):
    """The slow text is still being graded when the fixed one is saved: only the fixed one counts."""
    start, tmp = watching
    target = workdir / "sdpa.py"
    target.write_text(SLOW_EVERY)
    w = start("sdpa.py")
    w.wait_for(lambda: "running case " in w.errors())
    _save(target, SOLUTION)
    report = w.wait_report(1)
    assert "Accepted" in report, report
    code, err = w.interrupt(group=False)
    _assert_nothing_left(w, tmp, code, err)
    assert _attempts(torchcode_home) == [("accepted", _sha(SOLUTION))]


@pytest.mark.parametrize("group", [False, True], ids=["process", "terminal"])
def test_ctrl_c_during_a_grade_leaves_nothing(workdir, watching, torchcode_home, group):
    start, tmp = watching
    (workdir / "sdpa.py").write_text(SLOW_EVERY)
    w = start("sdpa.py")
    w.wait_for(lambda: "running case " in w.errors())
    code, err = w.interrupt(group=group)
    _assert_nothing_left(w, tmp, code, err)
    assert _attempts(torchcode_home) == []  # the grade never finished
    assert list((torchcode_home / "watching").iterdir()) == []  # its lock file went with it


def test_ctrl_c_while_the_session_starts(workdir, watching, torchcode_home):
    start, tmp = watching
    (workdir / "sdpa.py").write_text(SOLUTION)
    w = start("sdpa.py")
    w.wait_for(lambda: len(_family(w.p.pid)) >= 1, timeout=30)  # the session's process exists, torch still loading
    code, err = w.interrupt(group=True)
    _assert_nothing_left(w, tmp, code, err, processes=1)
    assert _attempts(torchcode_home) == []


def test_watch_usage_errors(cli, workdir):
    r = cli("watch")
    assert r.code == 2 and "nothing has been started" in r.err and "Traceback" not in r.err, r.err
    r = cli("watch", "nosuch")
    assert r.code == 2 and "no problem named 'nosuch'" in r.err, r.err
    r = cli("watch", "sdpa")
    assert r.code == 2 and "torchcode start sdpa" in r.err, r.err


def test_on_a_terminal_the_running_case_shows_and_ctrl_c_stops_it(workdir, tmp_path, torchcode_home):
    """A real terminal (a pty): the status line names the slow case, each report is drawn on a cleared
    screen, and Ctrl-C typed at the terminal (the line discipline signals the foreground group) ends it."""
    import fcntl
    import pty
    import struct
    import termios
    import threading

    tmp = tmp_path / "tmpdir"
    tmp.mkdir()
    (workdir / "sdpa.py").write_text(SLOW_ONCE)
    env = {**os.environ, "TMPDIR": str(tmp), "TERM": "xterm-256color", "COLUMNS": "120", "LINES": "40"}
    env.pop("NO_COLOR", None)
    pid, master = pty.fork()
    if pid == 0:  # the child: the pty is its controlling terminal, it leads the foreground group
        os.chdir(workdir)
        os.execvpe(_torchcode()[0], _torchcode() + ["watch", "sdpa.py", "--device", "cpu"], env)
    fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    chunks: list[bytes] = []

    def read() -> None:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    screen = lambda: re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", b"".join(chunks).decode("utf-8", "replace"))  # noqa: E731
    seen: set[int] = set()
    try:
        deadline = time.monotonic() + WAIT
        while "All hidden cases pass" not in screen():
            seen |= _family(pid)
            assert time.monotonic() < deadline, screen()
            time.sleep(0.05)
        text = screen()
        assert "Grading sdpa.py: case " in text and " of " in text, text
        assert text.index("Grading sdpa.py: case ") < text.index("Accepted")
        assert b"\x1b[2J" in b"".join(chunks)  # the report is redrawn on a cleared screen
        assert "Watching sdpa.py: save it to grade it again, Ctrl-C to stop." in text.split("Accepted", 1)[1]
        seen |= _family(pid)
        os.write(master, b"\x03")  # Ctrl-C, typed
        deadline = time.monotonic() + 60
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            assert time.monotonic() < deadline, screen()
            time.sleep(0.05)
        assert os.waitstatus_to_exitcode(status) == 0, screen()
        reader.join(timeout=5)
        assert "Stopped watching." in screen() and "Traceback" not in screen()
        assert len(seen) >= 2
        time.sleep(0.3)
        assert [p for p in seen if _alive(p)] == []
        assert list(tmp.iterdir()) == []
        assert [v for v, _ in _attempts(torchcode_home)] == ["accepted"]
    finally:
        for p in {pid} | seen:
            if _alive(p):
                os.kill(p, signal.SIGKILL)
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
        os.close(master)


def test_a_grading_session_that_dies_is_said_and_the_next_save_grades(workdir, watching, torchcode_home):
    """Not the learner's fault, so not a verdict: the error is said, nothing recorded, and the next
    save starts a new session and grades."""
    start, tmp = watching
    target = workdir / "sdpa.py"
    target.write_text(SLOW_EVERY)
    w = start("sdpa.py")
    w.wait_for(lambda: "running case " in w.errors())
    server = [p for p in _family(w.p.pid)  # the session's process: watch's child (its zygote and worker are its)
              if int(Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[1]) == w.p.pid]
    assert len(server) == 1, server
    os.kill(server[0], signal.SIGKILL)
    w.wait_for(lambda: "The next save tries again." in w.errors())
    assert "error: " in w.errors() and "Traceback" not in w.errors(), w.errors()
    assert w.reports() == 0
    _save(target, SOLUTION)
    assert "Accepted" in w.wait_report(1)
    code, err = w.interrupt(group=True)
    _assert_nothing_left(w, tmp, code, err)
    assert _attempts(torchcode_home) == [("accepted", _sha(SOLUTION))]


def test_watch_a_problem_from_a_pack(workdir, watching, torchcode_home):
    """`--problems-dir` reaches the session, and the reproduce line names the pack."""
    start, tmp = watching
    pack = ROOT / "tests" / "fixtures" / "course_pack"
    (workdir / "good_attention.py").write_text((pack / "problems" / "good_attention" / "wrong" / "missing_scale.py").read_text())
    w = start("good_attention.py", "--problems-dir", str(pack))
    w.header = re.compile(r"good_attention\.py at \d\d:\d\d:\d\d")
    report = w.wait_report(1)
    assert "Wrong answer" in report and f"--problems-dir {os.path.relpath(pack, workdir)}" in report, report
    _save(workdir / "good_attention.py", (pack / "solutions" / "good_attention.py").read_text())
    assert "Accepted" in w.wait_report(2)
    code, err = w.interrupt(group=False)
    _assert_nothing_left(w, tmp, code, err)
    assert [v for v, _ in _attempts(torchcode_home)] == ["wrong_answer", "accepted"]


def test_gpu_dry_run_advice_on_every_accepted_save(workdir, watching, torchcode_home):
    """`watch --gpu-dry-run` says what `check --gpu-dry-run` says: a mask made on the CPU would fail on a GPU."""
    start, tmp = watching
    cpu_mask = (ROOT / "solutions" / "causal_attention.py").read_text().replace(", device=Q.device", "")
    (workdir / "causal_attention.py").write_text(cpu_mask)
    w = start("causal_attention.py", "--gpu-dry-run")
    w.header = re.compile(r"causal_attention\.py at \d\d:\d\d:\d\d")
    report = w.wait_report(1)
    assert "Accepted" in report and "would fail on a GPU" in report and "line 11 (`causal = torch.ones(" in report, report
    _save(workdir / "causal_attention.py", (ROOT / "solutions" / "causal_attention.py").read_text())
    report = w.wait_report(2)
    assert "Accepted" in report and "would fail on a GPU" not in report, report
    code, err = w.interrupt(group=False)
    _assert_nothing_left(w, tmp, code, err)


def test_a_file_system_without_locks_still_watches(tmp_path, monkeypatch):
    """flock failing for want of locks (ENOLCK: NFS without lockd) is no reason to refuse every watch; only a lock
    held by another watch refuses (it did refuse all: every OSError read as 'already watched')."""
    import errno
    import fcntl

    from torchcode.commands import watch
    from torchcode.errors import UsageError

    monkeypatch.setenv("TORCHCODE_HOME", str(tmp_path / "home"))
    f = tmp_path / "gqa.py"
    f.write_text("")
    first = watch._the_only_watch(f)
    assert first is not None
    with pytest.raises(UsageError, match="already watched"):  # a real second lock, in another open file
        watch._the_only_watch(tmp_path / "." / "gqa.py")
    first.close()

    def no_locks(*a):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_locks)
    assert watch._the_only_watch(f) is None


def test_a_watch_removes_its_lock_file_and_a_stale_handle_never_lets_two_in(tmp_path, monkeypatch):
    """A watch that ends removes its lock file (they piled up in TORCHCODE_HOME/watching/). It removes it while
    still holding the lock: a watch that opened the file just before, and gets the lock once it is let go, holds a
    file no longer there, so it opens the new one; two watches of one file never run at once."""
    import fcntl

    from torchcode.commands import watch
    from torchcode.errors import UsageError

    monkeypatch.setenv("TORCHCODE_HOME", str(tmp_path / "home"))
    f = tmp_path / "gqa.py"
    f.write_text("")
    first = watch._the_only_watch(f)
    folder = tmp_path / "home" / "watching"
    assert len(list(folder.iterdir())) == 1
    watch._release(first)
    assert list(folder.iterdir()) == []  # the first watch ended: nothing left

    first = watch._the_only_watch(f)
    real = fcntl.flock

    def first_ends_meanwhile(fd, op):  # the first watch ends between the second's open and its flock
        fcntl.flock = real
        watch._release(first)
        return real(fd, op)

    monkeypatch.setattr(fcntl, "flock", first_ends_meanwhile)
    second = watch._the_only_watch(f)  # got the old file's lock, saw it gone, took the new file's
    monkeypatch.setattr(fcntl, "flock", real)
    assert second is not None and watch._names(second)
    with pytest.raises(UsageError, match="already watched"):  # the second holds the lock a third one meets
        watch._the_only_watch(f)
    watch._release(second)
    assert list(folder.iterdir()) == []

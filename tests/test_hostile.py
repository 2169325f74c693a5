"""Hostile and broken submissions: each gets the right verdict, and the grader stays healthy."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import ROOT, Run, corpus_seed, expected_verdict, family
from torchcode.grader import confine
from torchcode.grader.judge import Limits
from torchcode.grader.tree import SCRATCH


def problem_of(path: Path) -> str:
    m = re.search(r"^# problem: (\w+)", path.read_text(), re.M)
    return m.group(1) if m else "sdpa"

HOSTILE = sorted((Path(__file__).parent / "hostile").glob("*.py"))
CONFINABLE = sys.platform == "linux" and confine._abi() >= 1
needs_confinement = pytest.mark.skipif(not CONFINABLE, reason="this kernel has no Landlock/seccomp")


# Most of the corpus is graded in this process, by the grader `check` uses (confined workers forked from one
# zygote): a `torchcode check` process per file cost a torch import each, most of this file's time. The files that
# reach past their worker, at the process that graded them (its signals, its descriptors, its environment: the
# TORCHCODE_HOME of the check), or flood its output, are graded by the real command instead: a process of their
# own, never the test runner.
def reaches_past_the_worker(path: Path) -> bool:
    text = path.read_text()
    return (path.stem == "floods_output" or limits_of(path) is None
            or bool(re.search(r"getppid|ancestor|TORCHCODE_HOME|/dev/tty|/dev/pts", text)))


ARGS = {"--time-limit": ("time_limit", float), "--total-time-limit": ("total_limit", float),
        "--memory-limit": ("memory_mb", int)}


def limits_of(path: Path) -> Limits | None:
    """The limits `check --device cpu --time-limit 1` gives the file, with its own `# args:` line laid over
    (None: that line has options other than these limits, for the real command)."""
    m = re.search(r"^# args: (.*)$", path.read_text(), re.M)
    words = m.group(1).split() if m else []
    limits = Limits(time_limit=1.0, device="cpu")
    if len(words) % 2 or any(flag not in ARGS and flag != "--dtype" for flag in words[::2]):
        return None
    for flag, value in zip(words[::2], words[1::2]):
        if flag == "--dtype":
            continue  # dtype_of
        name, kind = ARGS[flag]
        setattr(limits, name, kind(value))
    return limits


def dtype_of(path: Path) -> list[str] | None:
    """The dtype its `# args: --dtype X` line grades in (one of the declared ones; None: the default)."""
    m = re.search(r"^# args: .*--dtype (\w+)", path.read_text(), re.M)
    return [m.group(1)] if m else None


THROUGH_THE_CLI = [p for p in HOSTILE if reaches_past_the_worker(p)]
IN_THIS_PROCESS = [p for p in HOSTILE if not reaches_past_the_worker(p)]
# One seed per problem (conftest.corpus_seed): the grader builds that seed's cases (the reference run on them) once
# for the whole corpus, not once per file, as for a class graded on one seed.
SEED: dict[str, int] = {}


@pytest.mark.parametrize("path", IN_THIS_PROCESS, ids=[p.stem for p in IN_THIS_PROCESS])
def test_hostile_submission(path, grader, catalog, tmp_path, capfd):
    """Each file of the corpus, graded confined as `check --json` grades it: the intended verdict, a report
    that serialises to clean JSON, a progress store that still records the attempt, nothing printed on the
    grader's own output, and nothing left behind (processes, temporary directories)."""
    from torchcode.progress import Store
    from torchcode.progress.record import record_report

    text = path.read_text()
    if "# needs: confinement" in text and not CONFINABLE:
        pytest.skip("this kernel has no Landlock/seccomp")
    spec = catalog.get(problem_of(path))
    tmp = tmp_path / "tmpdir"
    tmp.mkdir()
    old_tempdir, grader.limits = tempfile.tempdir, limits_of(path)
    before = set(_direct_children())
    _subreaper(True)
    try:
        tempfile.tempdir = str(tmp)
        start = time.monotonic()
        report = grader.grade(spec, path, seed=SEED.setdefault(spec.id, corpus_seed(spec.id)),
                              dtypes=dtype_of(path))
        seconds = time.monotonic() - start
    finally:
        _subreaper(False)
        tempfile.tempdir, grader.limits = old_tempdir, Limits()
    strays = {pid: _cmdline(pid) for pid in family(grader.zygote.pid)}  # workers, and whatever they started
    strays.update(kill_strays(before))  # orphans (the subreaper made them ours)
    assert not strays, f"processes left running: {strays}"
    left = sorted(p.name for p in tmp.iterdir())
    assert not left, f"temporary files left behind: {left}"
    assert seconds < 60
    out, err = capfd.readouterr()
    assert out == "" and "Traceback (most recent call last)" not in err, (out[-2000:], err[-2000:])
    shown = json.loads(json.dumps(report.to_dict(), indent=2))  # what `check --json` prints
    want = expected_verdict(path)
    assert shown["verdict"] == want, (shown["verdict"], shown["message"], shown["seed"])
    assert report.passed == (want == "accepted")  # `check` exits 0 exactly then
    assert "{exit}" not in shown["message"] and "{memory_mb}" not in shown["message"]
    store = Store()  # this test's TORCHCODE_HOME, as `check` records the attempt
    record_report(store, report, path)
    rows = sqlite3.connect(store.path).execute("SELECT verdict FROM attempts").fetchall()
    assert rows == [(want,)]


@pytest.mark.parametrize("path", THROUGH_THE_CLI, ids=[p.stem for p in THROUGH_THE_CLI])
def test_hostile_submission_through_the_cli(path, ahead, request):
    """The files that reach past their worker, graded by the real command: the intended verdict, a clean JSON
    report, a progress store that still works afterwards, and nothing left behind (processes, temp dirs)."""
    text = path.read_text()
    if "# needs: confinement" in text and not CONFINABLE:
        pytest.skip("this kernel has no Landlock/seccomp")
    done = ahead.result(request.node)  # started while the test before this one ran, when that one was one of these
    r = done.run
    assert not done.strays, f"processes left running: {done.strays}"
    assert not done.left, f"temporary directories left behind: {done.left}"
    assert done.seconds < 60
    report = json.loads(r.out)  # stdout is only the report, whatever the submission printed
    want = expected_verdict(path)
    assert report["verdict"] == want, (report["verdict"], report["message"])
    assert r.code == (0 if want == "accepted" else 1)
    assert "{exit}" not in report["message"] and "Traceback (most recent call last)" not in r.err
    rows = sqlite3.connect(done.home / "progress.sqlite3").execute("SELECT verdict FROM attempts").fetchall()
    assert rows == [(want,)]


def test_the_corpus_is_split_as_intended():
    assert {p.stem for p in THROUGH_THE_CLI} >= {"kills_grader", "stops_grader", "reads_progress_store",
                                                 "forges_session_reply", "writes_to_terminal", "floods_output"}
    assert len(IN_THIS_PROCESS) > 3 * len(THROUGH_THE_CLI) and not set(IN_THIS_PROCESS) & set(THROUGH_THE_CLI)


# -- one check ahead -----------------------------------------------------------------------------
# A check spends most of its time importing torch, on one core, and sleeping (time limits): on two cores the
# next file's check runs while this one's ends, so the corpus takes about half the time. Only ever the next
# test's check, and only when the next test is one of these: no other test ever runs beside one.
@dataclass
class Checked:
    run: Run
    seconds: float
    strays: dict[int, str]
    left: list[str]
    home: Path


class Ahead:
    def __init__(self, tmp_path_factory):
        self.factory = tmp_path_factory
        self.futures: dict[str, Future] = {}
        self.pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="hostile-check")
        self.lock = threading.Lock()  # a CLI process is started, or the strays counted, never both at once
        self.running: set[int] = set()  # the CLI processes now running: never strays, never waited for here
        self.reaping = 0

    def result(self, node) -> Checked:
        items = node.session.items
        at = items.index(node)
        if node.nodeid not in self.futures:
            self._start(node)
        nxt = items[at + 1] if at + 1 < len(items) else None
        if os.environ.get("PYTEST_XDIST_WORKER"):  # under xdist the next item may run elsewhere: none ahead
            nxt = None
        if nxt is not None and getattr(nxt, "originalname", None) == node.originalname and nxt.module is node.module:
            path = nxt.callspec.params["path"]
            if "# needs: confinement" not in path.read_text() or CONFINABLE:
                self._start(nxt)
        return self.futures.pop(node.nodeid).result()

    def _start(self, node) -> None:
        if node.nodeid not in self.futures:
            path = node.callspec.params["path"]
            self.futures[node.nodeid] = self.pool.submit(self._check, path, self.factory.mktemp(path.stem))

    def _check(self, path: Path, base: Path) -> Checked:
        extra = re.search(r"^# args: (.*)$", path.read_text(), re.M)
        (base / "work").mkdir()
        tmp = base / "tmpdir"
        tmp.mkdir()
        env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1", "TMPDIR": str(tmp), "TORCHCODE_HOME": str(base / "home")}
        env.pop("TORCHCODE_PROBLEMS", None)
        exe = shutil.which("torchcode")
        cmd = ([exe] if exe else [sys.executable, "-m", "torchcode"]) + [
            "check", str(path), "--problem", problem_of(path), "--device", "cpu", "--time-limit", "1", "--json",
            *(extra.group(1).split() if extra else ())]
        with self.lock:
            before = set(_direct_children())
            if self.reaping == 0:
                _subreaper(True)
            self.reaping += 1
            start = time.monotonic()
            p = subprocess.Popen(cmd, cwd=base / "work", env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
            self.running.add(p.pid)
        try:
            try:
                out, err = p.communicate(timeout=120)
            except subprocess.TimeoutExpired:
                p.kill()
                out, err = p.communicate()
            seconds = time.monotonic() - start
            with self.lock:
                self.running.discard(p.pid)  # reaped by communicate
            strays = self._strays(before)
        finally:
            with self.lock:
                self.running.discard(p.pid)
                self.reaping -= 1
                if self.reaping == 0:
                    _subreaper(False)
        left = sorted(p.name for p in tmp.glob(SCRATCH + "*"))
        return Checked(Run(p.returncode, out, err), seconds, strays, left, base / "home")

    def _strays(self, before: set[int]) -> dict[int, str]:
        """This check's processes still running once it ended (waited for up to 5 s), killed. (An orphan of the
        other check running would be counted here too: a stray all the same.)"""
        return kill_strays(before, self.running, self.lock)

    def close(self) -> None:
        for f in self.futures.values():
            f.cancel()
        self.pool.shutdown(wait=True)


@pytest.fixture(scope="module")
def ahead(tmp_path_factory):
    a = Ahead(tmp_path_factory)
    yield a
    a.close()


# -- nothing left behind -------------------------------------------------------------------------
PR_SET_CHILD_SUBREAPER = 36


def _subreaper(on: bool) -> None:
    """Orphans of the command we run become our children (instead of init's), so we can find them."""
    if sys.platform == "linux":
        import ctypes

        ctypes.CDLL(None).prctl(PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0)


def kill_strays(before: set[int], running: set[int] = frozenset(), lock=None) -> dict[int, str]:
    """Children of this process, not in ``before`` (nor ``running``), still alive after up to 5 s: killed,
    and returned with their command lines (the subreaper makes orphans ours)."""
    strays: list[int] = []
    deadline = time.monotonic() + 5
    while sys.platform == "linux":
        strays = []
        with lock or contextlib.nullcontext():
            for pid in set(_direct_children()) - before - set(running):
                try:
                    if os.waitpid(pid, os.WNOHANG)[0] == 0:  # not a zombie: still running
                        strays.append(pid)
                except ChildProcessError:
                    pass
        if not strays or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    found = {pid: _cmdline(pid) for pid in strays}
    for pid in strays:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    return found


def _direct_children() -> list[int]:
    me, out = os.getpid(), []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if int((d / "stat").read_text().rsplit(")", 1)[1].split()[1]) == me:
                    out.append(int(d.name))
            except (OSError, ValueError, IndexError):
                continue
    return out


@contextlib.contextmanager
def nothing_left_behind(tmp_path: Path):
    """Run a command (with the environment this yields) and then assert that no process it started is
    still alive and that it left no temporary folder of its own in its TMPDIR."""
    tmp = tmp_path / "tmpdir"
    tmp.mkdir(exist_ok=True)
    before = set(_direct_children())
    _subreaper(True)
    try:
        yield {"TMPDIR": str(tmp)}
    finally:
        _subreaper(False)
    found = kill_strays(before)
    assert not found, f"processes left running: {found}"
    left = sorted(p.name for p in tmp.glob(SCRATCH + "*"))
    assert not left, f"temporary directories left behind: {left}"


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:200]
    except OSError:
        return "?"


def test_time_limit_names_the_limit(grader, catalog):
    grader.limits = Limits(time_limit=0.5)
    try:
        report = grader.grade(catalog.get("sdpa"), Path(__file__).parent / "hostile" / "infinite_loop.py")
    finally:
        grader.limits = Limits()
    assert "0.5 s" in report.message
    verdicts = sorted(c.verdict.value for c in report.cases)  # the first case to run (seeded order) hits it
    assert verdicts == ["not_run"] * (len(report.cases) - 1) + ["time_limit"]


def test_crash_says_how_the_process_ended(grader, catalog):
    report = grader.grade(catalog.get("sdpa"), Path(__file__).parent / "hostile" / "segfault.py")
    assert "SIGSEGV" in report.message


def test_a_process_that_could_not_start_a_thread_is_told_so(grader, catalog, tmp_path):
    """OpenMP prints one line and exits when confinement refuses a thread (torch.set_num_threads(8) once did that:
    the worker now keeps its own count, right/sets_thread_count.py): the crash names threads, not memory."""
    path = tmp_path / "threads.py"
    path.write_text("import os, sys\n\n\ndef causal_attention(Q, K, V):\n"
                    "    sys.stderr.write('libgomp: Thread creation failed: Operation not permitted\\n')\n"
                    "    sys.stderr.flush()\n    os._exit(1)\n")
    report = grader.grade(catalog.get("causal_attention"), path, seed=1)
    assert report.verdict.value == "crashed"
    assert "asked for more threads than the 1 it runs on" in report.message, report.message
    assert "exited with code 1 during this case" in report.message and "{exit}" not in report.message

    # OpenMP's line printed by the submission itself, then an abort: its own crash, told as one (attack26)
    path.write_text(path.read_text().replace("os._exit(1)", "os.abort()"))
    report = grader.grade(catalog.get("causal_attention"), path, seed=1)
    assert report.verdict.value == "crashed" and "threads" not in report.message, report.message
    assert "SIGABRT" in report.message, report.message

    # a numpy integer asks as an int does (torch takes it): capped too
    path.write_text((ROOT / "problems" / "causal_attention" / "right" / "sets_thread_count.py").read_text()
                    .replace("torch.set_num_threads(4)", "import numpy\n\ntorch.set_num_threads(numpy.int64(4))"))
    report = grader.grade(catalog.get("causal_attention"), path, seed=1)
    assert report.passed, report.message


def test_a_tensor_subclass_of_its_own_is_told_to_use_plain_tensors_and_torchs_causal_bias_works(grader, catalog):
    """Under the guard's dispatch mode a tensor subclass's constructor fails inside torch ("Creating a new Tensor
    subclass ... already associated"): torch's own CausalBias (causal_lower_right) is built outside it and passes; a
    class of the learner's own is told why and what to use, not left with torch's words alone."""
    report = grader.grade(catalog.get("causal_attention"), Path(__file__).parent / "hostile" /
                          "builds_its_own_tensor_subclass.py")
    assert report.verdict.value == "runtime_error" and "cannot be made while the grader watches" in report.message
    assert "a bool mask" in report.message, report.message
    right = Path(__file__).parent.parent / "problems" / "causal_attention" / "right" / "mask_from_causal_bias.py"
    assert grader.grade(catalog.get("causal_attention"), right).passed


def test_syntax_error_points_at_the_line(grader, catalog):
    report = grader.grade(catalog.get("sdpa"), Path(__file__).parent / "hostile" / "syntax_error.py")
    assert "syntax_error.py:2" in report.message
    assert "^" in report.traceback
    assert all(c.verdict.value == "not_run" for c in report.cases) and report.cases_passed == 0


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


@needs_confinement
def test_confinement_is_in_force(grader, catalog):
    report = grader.grade(catalog.get("sdpa"), catalog.get("sdpa").solution_path)
    assert report.limits["confined"] == {"filesystem": True, "processes": True, "threads": True, "signals": True,
                                         "landlock_abi": confine._abi()}


@needs_confinement
def test_reference_stays_out_of_reach(grader, catalog):
    """Importing torchcode again (it is gone from sys.modules) means reading protected files: refused, either
    by Landlock (Permission denied) or, when the import system must list a protected directory to find the
    package, by finding nothing there."""
    report = grader.grade(catalog.get("sdpa"), Path(__file__).parent / "hostile" / "imports_reference_dynamically.py")
    assert report.verdict.value == "runtime_error", report.message
    assert "Permission denied" in report.message or "No module named 'torchcode" in report.message, report.message


def test_memory_limit_names_its_value(grader, catalog):
    report = grader.grade(catalog.get("sdpa"), Path(__file__).parent / "hostile" / "allocates_50gb.py")
    assert f"{grader.limits.memory_mb} MB" in report.message


def test_total_time_limit(grader, catalog):
    grader.limits = Limits(time_limit=5.0, total_limit=0.8)
    try:
        report = grader.grade(catalog.get("sdpa"), Path(__file__).parent / "hostile" / "sleep_forever.py")
    finally:
        grader.limits = Limits()
    assert report.verdict.value == "time_limit" and "whole check" in report.message


def test_ctrl_c_stops_the_check_and_leaves_no_process(cli, workdir):
    """SIGINT to a running `torchcode check`: exit 130, worker and zygote gone, nothing recorded as a verdict."""
    import shutil
    import signal
    import subprocess

    shutil.copy(Path(__file__).parent / "hostile" / "infinite_loop.py", workdir / "sdpa.py")
    exe = shutil.which("torchcode")
    cmd = [exe] if exe else [sys.executable, "-m", "torchcode"]
    p = subprocess.Popen(cmd + ["check", "sdpa", "--time-limit", "60"], cwd=workdir, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    family: list[int] = []
    while time.monotonic() < deadline:  # wait until the worker runs: the CLI, its zygote and a grandchild
        family = _children(p.pid)
        if len(family) >= 2:
            break
        time.sleep(0.05)
    assert len(family) >= 2, "the worker never started"
    time.sleep(0.3)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 130, (out, err)
    assert "interrupted" in err and "Traceback" not in err
    time.sleep(0.2)
    alive = [pid for pid in family if Path(f"/proc/{pid}").exists() and "Z" not in _state(pid)]
    assert alive == [], alive


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


# -- item by item: what the corpus alone cannot show ------------------------------------------------
HOSTILE_DIR = Path(__file__).parent / "hostile"


def test_a_32bit_system_call_is_named(grader, catalog):
    report = grader.grade(catalog.get("sdpa"), HOSTILE_DIR / "forks_via_int80.py")
    if CONFINABLE and confine.seccomp_program("x86_64", 1, False) and os.uname().machine == "x86_64":
        assert "SIGSYS" in report.message, report.message


@needs_confinement
def test_the_terminal_is_out_of_reach(tmp_path):
    """The check runs on a terminal of its own (its controlling terminal and an inherited descriptor):
    the submission's writes to /dev/tty, the inherited descriptor and /dev/pts/* never reach it."""
    import fcntl
    import pty
    import subprocess
    import termios

    master, slave = pty.openpty()
    os.set_blocking(master, False)

    def controlling_terminal():
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    exe = shutil.which("torchcode")
    cmd = ([exe] if exe else [sys.executable, "-m", "torchcode"]) + [
        "check", str(HOSTILE_DIR / "writes_to_terminal.py"), "--problem", "sdpa", "--device", "cpu", "--json"]
    with nothing_left_behind(tmp_path) as env:
        p = subprocess.run(cmd, stdin=slave, capture_output=True, text=True, timeout=120, pass_fds=(slave,),
                           preexec_fn=controlling_terminal, env=dict(os.environ, **env), cwd=tmp_path)
    os.close(slave)
    try:
        screen = os.read(master, 1 << 16)
    except (BlockingIOError, OSError):
        screen = b""
    os.close(master)
    report = json.loads(p.stdout)
    assert report["verdict"] == "runtime_error" and "Permission denied" in report["message"], report["message"]
    assert b"Accepted" not in screen and screen == b"", screen


@needs_confinement
def test_a_killed_grader_leaves_nothing_behind(tmp_path, workdir):
    """If the trusted process dies mid-check (here: SIGKILL from outside), the zygote kills the worker and
    removes the temporary directory."""
    import subprocess

    shutil.copy(HOSTILE_DIR / "infinite_loop.py", workdir / "sdpa.py")
    exe = shutil.which("torchcode")
    cmd = ([exe] if exe else [sys.executable, "-m", "torchcode"]) + ["check", "sdpa.py", "--problem", "sdpa",
                                                                       "--device", "cpu", "--time-limit", "60"]
    with nothing_left_behind(tmp_path) as env:
        p = subprocess.Popen(cmd, cwd=workdir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             env=dict(os.environ, **env))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not list((tmp_path / "tmpdir").rglob("output.txt")):
            time.sleep(0.05)
        assert list((tmp_path / "tmpdir").rglob("output.txt")), "the worker never started"
        while time.monotonic() < deadline and len(_children(p.pid)) < 2:
            time.sleep(0.05)
        p.kill()
        p.wait()


@needs_confinement
def test_a_non_editable_venv_keeps_references_and_store_out_of_reach(installed_venv, tmp_path):
    """A real `python -m venv` with torchcode pip-installed (not editable): `lib64 -> lib` exists, the
    course lives in site-packages/torchcode/_builtin, TORCHCODE_HOME is relative. Submissions read
    neither the reference (through lib64 or the real path) nor the progress store."""
    import subprocess

    work = tmp_path / "work"
    work.mkdir()
    assert (installed_venv / "lib64").is_symlink()
    env = dict(os.environ, TORCHCODE_HOME="home", PATH=f"{installed_venv / 'bin'}:{os.environ['PATH']}")
    env.pop("PYTHONPATH", None)

    def check(name: str) -> dict:
        shutil.copy(HOSTILE_DIR / name if (HOSTILE_DIR / name).exists() else name, work / Path(name).name)
        with nothing_left_behind(tmp_path) as tmp_env:
            p = subprocess.run([str(installed_venv / "bin" / "torchcode"), "check", Path(name).name, "--problem", "sdpa",
                                "--device", "cpu", "--json"], cwd=work, capture_output=True, text=True, timeout=180,
                               env=dict(env, **tmp_env))
        assert "Traceback" not in p.stderr, p.stderr
        return json.loads(p.stdout)

    site = next((installed_venv / "lib").glob("python3*/site-packages"))
    solution = site / "torchcode" / "_builtin" / "solutions" / "sdpa.py"
    assert solution.is_file() and not (site / "torchcode" / "_builtin" / "solutions").is_symlink()
    ok = check(str(solution))  # the reference itself, graded as a submission: creates the store
    assert ok["verdict"] == "accepted" and all(ok["limits"]["confined"][k] for k in ("filesystem", "processes"))
    assert (work / "home" / "progress.sqlite3").is_file()
    for name in ("reads_reference_lib64.py", "reads_reference_realpath.py", "reads_progress_store.py"):
        report = check(name)
        assert report["verdict"] == "runtime_error" and "Permission denied" in report["message"], (name, report["message"])


@pytest.fixture(scope="module")
def installed_venv(tmp_path_factory):
    """`python -m venv` plus `pip install --no-deps --no-build-isolation` of this checkout; torch and the
    other dependencies come from the test environment through a .pth file (offline, a few seconds)."""
    import site
    import subprocess
    import sysconfig

    root = Path(__file__).resolve().parents[1]
    venv = tmp_path_factory.mktemp("venv") / "v"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    purelib = Path(subprocess.run([str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                  capture_output=True, text=True, check=True).stdout.strip())
    parents = [p for p in site.getsitepackages() + [sysconfig.get_paths()["purelib"]] if Path(p).is_dir()]
    (purelib / "_test_environment.pth").write_text("\n".join(dict.fromkeys(parents)) + "\n")
    p = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                        "--no-index", str(root)], capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        pytest.skip(f"could not pip-install torchcode into a fresh venv offline: {p.stderr[-500:]}")
    return venv


def test_lone_surrogates_in_a_message_break_no_report(cli, tmp_path):
    """An exception message holding lone surrogates: `check` shows them escaped, and `torchcode grade`
    writes every student's feedback (it used to die with a traceback on the first such student)."""
    r = cli("check", str(HOSTILE_DIR / "surrogate_in_error.py"), "--problem", "sdpa", "--device", "cpu")
    assert r.code == 1 and "Traceback" not in r.err
    assert "lone surrogates: \\ud800 and \\udcff" in r.out
    widths = {len(line) for line in r.out.splitlines() if line.startswith(("│", "|"))}
    assert len(widths) == 1, widths  # the panel's right border stays aligned: nothing was expanded late
    work, out = tmp_path / "class", tmp_path / "out"
    for student, src in (("alice", HOSTILE_DIR / "surrogate_in_error.py"), ("bob", _solution("sdpa"))):
        (work / student).mkdir(parents=True)
        shutil.copy(src, work / student / "sdpa.py")
    r = cli("grade", str(work), "--problems", "sdpa", "--out", str(out), "--workers", "1", "--device", "cpu",
            timeout=300)
    assert "Traceback" not in r.err, r.err[-2000:]
    assert sorted(p.name for p in (out / "feedback").iterdir()) == ["alice.txt", "bob.txt"]
    assert "lone surrogates: \\ud800" in (out / "feedback" / "alice.txt").read_text(encoding="utf-8")
    assert "Accepted" in (out / "feedback" / "bob.txt").read_text(encoding="utf-8")


def _solution(problem: str) -> Path:
    return Path(__file__).resolve().parents[1] / "solutions" / f"{problem}.py"


def test_a_student_folder_name_never_drives_the_terminal_through_the_grade_files(cli, tmp_path):
    """A student folder named with terminal control sequences (a zip member can be named anything): the
    feedback file and grades.csv, which an instructor reads with `cat`, hold it escaped, never raw."""
    work, out = tmp_path / "class", tmp_path / "out"
    eve = "eve\x1b[2J\x1b]0;pwned\x07"
    for student, src in ((eve, HOSTILE_DIR / "returns_zeros.py"), ("bob", _solution("sdpa"))):
        (work / student).mkdir(parents=True)
        shutil.copy(src, work / student / "sdpa.py")
    r = cli("grade", str(work), "--problems", "sdpa", "--out", str(out), "--workers", "1", "--device", "cpu",
            timeout=300)
    assert "Traceback" not in r.err, r.err[-2000:]
    written = {p.name: p.read_bytes() for p in [out / "grades.csv", *(out / "feedback").iterdir()]}
    assert len(written) == 3
    for name, data in written.items():
        assert b"\x1b" not in data and b"\x07" not in data, name
    assert b"eve\\x1b[2J\\x1b]0;pwned\\x07" in written["grades.csv"]
    assert any(b"Feedback for eve\\x1b[2J" in data for data in written.values())


def test_a_zip_whose_member_name_is_not_the_utf8_it_claims_is_a_usage_error(cli, tmp_path):
    """A class zip with a member named with bytes that are not UTF-8, flagged as UTF-8: Python's zipfile
    cannot read its directory at all. A clear usage error (exit 2), not a traceback."""
    import io
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("alice/sdpa.py", _solution("sdpa").read_text())
        z.writestr("bob/sdpa.py", _solution("sdpa").read_text())
    data = bytearray(buf.getvalue())
    for sig, flags_at in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):  # local and central headers: UTF-8 flag on
        k = data.find(sig)
        while k >= 0:
            data[k + flags_at + 1] |= 0x08  # bit 11 of the little-endian flags word: its second byte
            k = data.find(sig, k + 4)
    k = data.find(b"bob/")
    while k >= 0:
        data[k + 1] = 0xFF  # "b\xffb/sdpa.py"
        k = data.find(b"bob/", k + 1)
    (tmp_path / "class.zip").write_bytes(bytes(data))
    r = cli("grade", str(tmp_path / "class.zip"), "--problems", "sdpa", "--out", str(tmp_path / "out"),
            "--workers", "1", "--device", "cpu")
    assert r.code == 2, (r.out, r.err)
    assert "cannot be read as a zip" in r.err and "Traceback" not in r.err, r.err


@needs_confinement
def test_a_helper_linked_to_the_reference_or_the_cases_is_out_of_reach(grader, catalog, tmp_path):
    """Helper modules beside a submission are importable (its folder is readable), but a symlink there leads
    nowhere protected: the reference and the hidden cases stay unreadable through it, as imports and as files."""
    spec = catalog.get("sdpa")
    (tmp_path / "reference.py").symlink_to(spec.solution_path)
    (tmp_path / "hidden.py").symlink_to(spec.cases_path)
    (tmp_path / "sdpa.py").write_text(
        "import os\n"
        "seen = []\n"
        "for name in ('reference.py', 'hidden.py'):\n"
        "    try:\n"
        "        open(os.path.join(os.path.dirname(__file__), name), 'rb').read(1)\n"
        "        seen.append('read')\n"
        "    except PermissionError:\n"
        "        seen.append('denied')\n"
        "try:\n"
        "    from reference import scaled_dot_product_attention\n"
        "except PermissionError:\n"
        "    seen.append('import denied')\n"
        "raise RuntimeError('links: ' + ','.join(seen))\n")
    report = grader.grade(spec, tmp_path / "sdpa.py")
    assert report.verdict.value == "runtime_error" and "links: denied,denied,import denied" in report.message, \
        report.message


@needs_confinement
def test_a_notebook_started_in_the_root_folder_opens_nothing_protected(grader, catalog, tmp_path):
    """Helpers are imported from the notebook's folder (Limits.imports_from, as the Jupyter magic sets it): a Jupyter
    started in `/` (a container's default) made `/` readable, and with it the references, the hidden cases and the
    progress store. `/`, the home directory's parents and /tmp are never opened up: only the file."""
    spec = catalog.get("sdpa")
    (tmp_path / "sdpa.py").write_text(
        "seen = []\n"
        f"for path in ({str(spec.solution_path)!r}, {str(spec.cases_path)!r}):\n"
        "    try:\n"
        "        open(path, 'rb').read(1)\n"
        "        seen.append('read')\n"
        "    except PermissionError:\n"
        "        seen.append('denied')\n"
        "raise RuntimeError('protected: ' + ','.join(seen))\n")
    grader.limits = Limits(imports_from=["/"])
    try:
        report = grader.grade(spec, tmp_path / "sdpa.py")
    finally:
        grader.limits = Limits()
    assert report.verdict.value == "runtime_error" and "protected: denied,denied" in report.message, report.message


def test_a_helper_module_is_scanned_as_the_file_is(grader, catalog, tmp_path):
    """The source scan read the submission's own file only: a helper beside it could switch the dispatch guards off
    (here: flash attention on the whole score matrix, unseen by the largest-intermediate check, was accepted). A
    helper's source is scanned when it is imported, and a helper compiled without its source is refused."""
    import importlib.util
    import py_compile

    spec = catalog.get("flash_attention")
    (tmp_path / "flash_helpers.py").write_text(
        "import math\n\nimport torch\n\n\n"
        "def attend(Q, K, V):\n"
        "    with torch._C._DisableTorchDispatch():\n"
        "        s = Q @ K.transpose(1, 2) / math.sqrt(Q.shape[-1])\n"
        "        return torch.softmax(s, dim=-1) @ V\n")
    (tmp_path / "flash_attention.py").write_text(
        "from flash_helpers import attend\n\n\n"
        "def flash_attention(Q, K, V, block_size=32):\n"
        "    return attend(Q, K, V)\n")
    report = grader.grade(spec, tmp_path / "flash_attention.py")
    assert report.verdict.value == "forbidden_call", report.message
    assert "flash_helpers.py line 7 uses `_DisableTorchDispatch`" in report.message, report.message
    # its bytecode cached in __pycache__ under an innocent source of the same size and time: the import runs the
    # source it scanned, never the cache
    helper = tmp_path / "flash_helpers.py"
    hostile, st = helper.read_bytes(), helper.stat()
    py_compile.compile(str(helper), cfile=importlib.util.cache_from_source(str(helper)))
    py_compile.compile(str(helper), cfile=str(tmp_path / "flash_helpers.pyc"))
    benign = b"def attend(Q, K, V):\n    raise NotImplementedError('the source ran')\n"
    helper.write_bytes(benign + b"#" * (len(hostile) - len(benign) - 1) + b"\n")
    os.utime(helper, ns=(st.st_atime_ns, st.st_mtime_ns))
    report = grader.grade(spec, tmp_path / "flash_attention.py")
    assert report.verdict.value != "accepted" and "the source ran" in report.message, report.message
    helper.unlink()  # a bare .pyc beside it: nothing to scan
    report = grader.grade(spec, tmp_path / "flash_attention.py")
    assert report.verdict.value == "forbidden_call" and "compiled Python without its source" in report.message, \
        report.message
    (tmp_path / "flash_helpers.pyc").unlink()  # the hostile helper in a zip archive beside it, put on sys.path
    import zipfile

    with zipfile.ZipFile(tmp_path / "helpers.zip", "w") as z:
        z.writestr("flash_helpers.py", hostile)
    (tmp_path / "flash_attention.py").write_text(
        "import os\nimport sys\n\nsys.path.insert(0, os.path.join(os.path.dirname(__file__), 'helpers.zip'))\n"
        "from flash_helpers import attend  # noqa: E402\n\n\n"
        "def flash_attention(Q, K, V, block_size=32):\n"
        "    return attend(Q, K, V)\n")
    report = grader.grade(spec, tmp_path / "flash_attention.py")
    assert report.verdict.value == "forbidden_call" and "helpers.zip is a zip archive" in report.message, report.message


@needs_confinement
def test_a_worker_reaches_no_unix_socket_of_another_program(grader, catalog, tmp_path):
    """Landlock does not cover connecting to a unix socket by its path: a confined worker connected to any socket
    of its user on the machine (a desktop's D-Bus session bus starts any command outside the sandbox, docker.sock
    any container), and a datagram socket can send to one with sendto. Here a stream and a datagram socket of
    another program listen beside the file: no connection, no datagram, and the grade goes on."""
    import socket

    stream, datagram = socket.socket(socket.AF_UNIX), socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    stream.bind(str(tmp_path / "bus.sock"))
    stream.listen(1)
    datagram.bind(str(tmp_path / "log.sock"))
    for s in (stream, datagram):
        s.setblocking(False)
    (tmp_path / "sdpa.py").write_text(
        "import os\nimport socket\n\n"
        "here, got = os.path.dirname(__file__), []\n"
        "for name, reach in (\n"
        "        ('connect', lambda: socket.socket(socket.AF_UNIX).connect(os.path.join(here, 'bus.sock'))),\n"
        "        ('sendto', lambda: socket.socketpair(type=socket.SOCK_DGRAM)[0].sendto(\n"
        "            b'x', os.path.join(here, 'log.sock')))):\n"
        "    try:\n"
        "        reach()\n"
        "        got.append(name + ' reached')\n"
        "    except OSError as e:\n"
        "        got.append(f'{name} refused ({e.errno})')\n"
        "raise RuntimeError('; '.join(got))\n")
    try:
        report = grader.grade(catalog.get("sdpa"), tmp_path / "sdpa.py")
        assert report.verdict.value == "runtime_error", report.message
        assert "connect refused" in report.message and "sendto refused" in report.message, report.message
        with pytest.raises(BlockingIOError):
            stream.accept()
        with pytest.raises(BlockingIOError):
            datagram.recv(16)
    finally:
        stream.close()
        datagram.close()


def test_a_zip_member_nested_a_thousand_folders_deep_is_skipped(tmp_path):
    """A student's member at alice/a/a/.../notes.txt, 1100 folders deep: making its folders (pathlib's mkdir with
    parents recurses once per level) raised RecursionError, and `torchcode grade` of the class ended with a
    traceback. It is skipped, said so, and the student's submission is unpacked."""
    import zipfile

    from torchcode.classroom.discover import unzip

    archive = tmp_path / "class.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("alice/sdpa.py", _solution("sdpa").read_text())
        z.writestr("alice/" + "a/" * 1100 + "notes.txt", "deep")
    skipped = unzip(archive, tmp_path / "out")
    assert (tmp_path / "out" / "alice" / "sdpa.py").is_file()
    assert len(skipped) == 1 and "nested more than" in skipped[0], skipped


def test_a_helper_named_like_a_module_the_session_imports_never_runs_unconfined(tmp_path, monkeypatch):
    """`watch`, `serve` and Jupyter grade through a session process started with `python -m` in the learner's
    folder, which put that folder first on its sys.path: a helper module there named like one the session
    imports (json.py) ran in that unconfined process when it started, with the user's rights. Not any more."""
    from torchcode.grader.limits import Limits
    from torchcode.session import Session

    (tmp_path / "json.py").write_text(
        "import os\nimport sys\n\n"
        "here = os.path.dirname(os.path.abspath(__file__))\n"
        "open(os.path.join(here, 'RAN_UNCONFINED'), 'w').close()\n"
        "sys.path[:] = [p for p in sys.path if os.path.abspath(p or '.') != here]\n"
        "del sys.modules['json']\n"
        "import json as _json  # noqa: E402  the real one, so that the session still starts\n"
        "sys.modules['json'] = _json\n")
    (tmp_path / "sdpa.py").write_text(_solution("sdpa").read_text())
    monkeypatch.chdir(tmp_path)
    with Session(limits=Limits(device="cpu")) as s:
        report = s.grade("sdpa", path=tmp_path / "sdpa.py", seed=1)
    assert report.verdict.value == "accepted", report.message
    assert not (tmp_path / "RAN_UNCONFINED").exists()


def test_a_submission_saved_among_the_installed_packages_is_still_the_learners(cli, tmp_path):
    """Inside its guards' handlers the grader tells torch's own code from the learner's by where it lies: a file saved
    in the user's site-packages folder (writable by any user) passed for torch's own there, and a weakref callback of
    its own computed flash attention's full score matrix unmeasured."""
    home = tmp_path / "home"
    site = home / ".local" / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    site.mkdir(parents=True)
    shutil.copy(Path(__file__).parent / "hostile" / "flash_matrix_in_a_weakref_callback.py", site / "kernel.py")
    r = cli("check", str(site / "kernel.py"), "--problem", "flash_attention", "--device", "cpu", "--seed", "1",
            "--json", env={"HOME": str(home)})
    report = json.loads(r.out)
    assert (r.code, report["verdict"]) == (1, "too_much_memory"), report["message"]  # watched, as anywhere else

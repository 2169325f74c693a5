"""Shared fixtures. Every test runs with its own TORCHCODE_HOME (user state moved aside)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "fixtures"

_GRADER = None
# Every `torchcode` the tests run grades on the CPU, as CI does, also on a machine with a GPU (its default,
# --device auto, would pick CUDA there); the CUDA tests (test_devices.py) ask for it, or for auto, themselves.
os.environ["TORCHCODE_DEVICE"] = "cpu"


def corpus_seed(name: str) -> int:
    """The grading seed the corpus tests use for ``name`` (a problem): fixed, so that CI grades the same inputs every
    run and cannot fail by chance. ``TORCHCODE_TEST_SEEDS=random`` draws a new one per run instead (a sweep of many
    seeds in every dtype is benchmarks/seed_sweep.py); the seed is in every failure's message."""
    if os.environ.get("TORCHCODE_TEST_SEEDS") == "random":
        import secrets

        return secrets.randbelow(2**31)
    import zlib

    return zlib.crc32(name.encode()) % 2**31


def pytest_configure(config):
    # The grader forks its zygote from this process, which must not have run a tensor op
    # yet (a fork after torch computed can hang). So it is created first, once.
    global _GRADER
    if getattr(config.option, "dist", "no") != "no" and "PYTEST_XDIST_WORKER" not in os.environ:
        _whole_files(config)
        return  # pytest-xdist's controller runs no test: only its workers need a grader
    from torchcode.grader.judge import Grader

    _GRADER = Grader()


def _whole_files(config) -> None:
    """`-n 2` alone hands out tests one by one ("load"): a module's tests then run in both processes, and its
    module-scoped fixtures (a class graded, a pack validated, a server, a venv) run twice, and each process
    builds the cases of the same problems. Unless --dist is given, whole files instead ("loadfile": the files
    with the most tests first, so the long ones start at once and the short ones fill in at the end)."""
    given = [*config.invocation_params.args, *os.environ.get("PYTEST_ADDOPTS", "").split()]
    if config.option.dist == "load" and not any(a == "-d" or a.startswith("--dist") for a in given):
        config.option.dist = "loadfile"
    if config.option.dist == "loadfile":
        config.option.loadscopereorder = False  # the order pytest_collection_modifyitems gives, below


# The files that take longest, heaviest first (a CI run's --durations, summed per file): under -n they start
# first, so that the two processes end together on short files. xdist's own order (the most tests first)
# started several of them last, one process running alone at the end. The rest follow, the most tests first.
HEAVY_FIRST = ["test_variants.py", "test_authoring.py", "test_hostile.py", "test_bench_trust.py", "test_session.py",
               "test_polish.py", "test_cli_flow.py", "test_bench.py", "test_interrupt.py", "test_bad_environments.py",
               "test_grade.py", "test_portable.py", "test_worker_start.py", "test_watch.py", "test_history.py",
               "test_walkthrough.py", "test_terminal_output.py", "test_serve.py", "test_confine.py", "test_jupyter.py"]


# The corpus file is half the suite's time: whole, it kept one process busy to the end while the other ran the rest.
# Its tests go out in parts instead (SplitCorpus), a problem's variants of one kind each, the heaviest problems first
# (a CI run's --durations: minimind_attention's are half the file).
SPLIT_FILES = ("test_variants.py",)
HEAVY_PROBLEMS = ["minimind_attention", "flash_attention", "kv_cache", "sliding_window", "causal_attention",
                  "linear_attention", "sdpa", "mha", "cross_attention", "gqa", "rope", "repeat_kv"]


def corpus_part(nodeid: str) -> str:
    """The part of a split file a test belongs to: ``problem/kind`` of a variant, ``problem`` of a test on one
    problem, '' for the rest."""
    m = re.search(r"\[([a-z]\w*)(?:/(wrong|right)/|\])", nodeid)
    return "" if m is None else m.group(1) + (f"/{m.group(2)}" if m.group(2) else "")


def pytest_collection_modifyitems(config, items):
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return  # run in one process: the files in their usual order
    count: dict = {}
    for item in items:
        count[item.path] = count.get(item.path, 0) + 1
    rank = {name: i for i, name in enumerate(HEAVY_FIRST)}
    heavy = {name: i for i, name in enumerate(HEAVY_PROBLEMS)}

    def part_rank(item) -> tuple:
        if item.path.name not in SPLIT_FILES:
            return ()
        part = corpus_part(item.nodeid)
        problem, _, kind = part.partition("/")
        return (heavy.get(problem, len(heavy)) if part else -1, kind != "wrong")

    items.sort(key=lambda item: (rank.get(item.path.name, len(rank)), -count[item.path], str(item.path),
                                 part_rank(item)))


@pytest.hookimpl(optionalhook=True)  # (xdist's hook: unknown where xdist is not installed)
def pytest_xdist_make_scheduler(config, log):
    """Whole files to each process (module fixtures run once), but SPLIT_FILES in parts (``corpus_part``)."""
    if getattr(config.option, "dist", "no") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class SplitCorpus(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            scope = super()._split_scope(nodeid)
            part = corpus_part(nodeid) if scope.endswith(SPLIT_FILES) else ""
            return f"{scope}::{part}" if part else scope

    return SplitCorpus(config, log)


def pytest_runtest_logreport(report):
    """With TORCHCODE_FAILURE_LOG=FILE, each failure's traceback is appended to FILE the moment it happens
    (benchmarks/gpu_verify.sh: a device call cut at its time limit still brings back every failure so far)."""
    log = os.environ.get("TORCHCODE_FAILURE_LOG")
    if log and report.failed and not os.environ.get("PYTEST_XDIST_WORKER"):
        with open(log, "a", encoding="utf-8", errors="backslashreplace") as f:
            f.write(f"=== {report.nodeid} ({report.when}, {report.duration:.1f} s)\n{report.longreprtext}\n\n")


def pytest_unconfigure(config):
    if _GRADER is not None:
        _GRADER.close()


@pytest.fixture(autouse=True)
def torchcode_home(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("TORCHCODE_HOME", str(home))
    monkeypatch.delenv("TORCHCODE_PROBLEMS", raising=False)
    return home


@pytest.fixture(scope="session")
def grader():
    return _GRADER


@pytest.fixture(scope="session")
def catalog():
    from torchcode.catalog import load_catalog

    return load_catalog()


@dataclass
class Run:
    code: int
    out: str
    err: str

    @property
    def text(self) -> str:
        return self.out + self.err


@pytest.fixture
def workdir(tmp_path):
    d = tmp_path / "work"
    d.mkdir()
    return d


def run_cli(*args: str, cwd: Path, timeout: float = 120, env: dict | None = None, preexec_fn=None) -> Run:
    """Run the real `torchcode` command in ``cwd``. ``env`` is laid over this process's environment; values of
    None remove a variable; ``preexec_fn`` runs in the child before exec."""
    exe = shutil.which("torchcode")
    cmd = [exe, *args] if exe else [sys.executable, "-m", "torchcode", *args]
    full_env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1", **(env or {})}
    full_env = {k: v for k, v in full_env.items() if v is not None}
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                       env=full_env, stdin=subprocess.DEVNULL, preexec_fn=preexec_fn)
    return Run(p.returncode, p.stdout, p.stderr)


@pytest.fixture
def cli(workdir):
    """Run the real `torchcode` command in a temp working directory."""

    def run(*args: str, cwd: Path | None = None, timeout: float = 120, env: dict | None = None,
            preexec_fn=None) -> Run:
        """``env`` values of None remove the variable; ``preexec_fn`` runs in the child before exec."""
        return run_cli(*args, cwd=cwd or workdir, timeout=timeout, env=env, preexec_fn=preexec_fn)

    return run


def module_cli(tmp_path_factory, *args: str, timeout: float = 120) -> Run:
    """One real `torchcode` run for a module-scoped fixture (shared by several tests): in a folder of its own,
    with a TORCHCODE_HOME of its own (the per-test one is not set up yet at module scope)."""
    base = tmp_path_factory.mktemp("cli")
    (base / "work").mkdir()
    return run_cli(*args, cwd=base / "work", timeout=timeout,
                   env={"TORCHCODE_HOME": str(base / "home"), "TORCHCODE_PROBLEMS": None})


def expected_verdict(path: Path) -> str:
    m = re.search(r"^# expect: (\w+)", path.read_text(), re.M)
    assert m, f"{path} has no '# expect: VERDICT' line"
    return m.group(1)


def family(pid: int) -> set[int]:
    """Every descendant of ``pid`` (children, grandchildren...), read from /proc."""
    kids = set()
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                kids.add(int(d.name))
    return kids | {g for k in kids for g in family(k)}


def alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def on_a_terminal(args: list[str], answer: bytes, cwd) -> str:
    """Run the real `torchcode` with a pseudo-terminal as stdin, stdout and stderr; when it asks [y/N], type
    ``answer``. It must then exit 0. Returns all it showed."""
    import pty

    leader, follower = pty.openpty()
    p = subprocess.Popen([shutil.which("torchcode"), *args], cwd=cwd, stdin=follower, stdout=follower,
                         stderr=follower, env={**os.environ, "NO_COLOR": "1"})
    os.close(follower)
    out = b""
    while b"[y/N]" not in out:
        chunk = os.read(leader, 1024)
        assert chunk, out
        out += chunk
    os.write(leader, answer)
    assert p.wait(timeout=60) == 0
    try:
        while chunk := os.read(leader, 1024):
            out += chunk
    except OSError:
        pass
    os.close(leader)
    return out.decode()


def at_once(*calls):
    """Call independent ``calls`` (each runs real commands, each in processes of its own) two at a time; their
    results, in order. A command spends most of its time importing torch, on one core: two cores run two."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = [pool.submit(call) for call in calls]
        return [f.result() for f in futures]

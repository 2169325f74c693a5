"""How a worker starts: its device is initialised before its confinement, and a worker that cannot
start is the grader's problem (exit 2, nothing recorded), never a verdict on the learner's code.

A fake device initialiser (tests/fixtures/fake_device.py) stands in for CUDA: CI has no GPU."""

from __future__ import annotations

import errno
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from conftest import FIXTURES, ROOT
from torchcode.errors import GraderError
from torchcode.grader import confine

CONFINABLE = sys.platform == "linux" and confine._abi() >= 1


def fake_env(name: str, tmp_path: Path, **extra) -> dict:
    path = os.pathsep.join([str(FIXTURES), os.environ.get("PYTHONPATH", "")])
    return {"TORCHCODE_DEVICE_INIT": f"fake_device:{name}", "PYTHONPATH": path, **extra}


def test_device_is_initialised_before_confinement(cli, workdir, tmp_path):
    log = tmp_path / "device.json"
    shutil.copy(ROOT / "solutions" / "sdpa.py", workdir / "sdpa.py")
    r = cli("check", "sdpa", "--device", "cpu", "--json", env=fake_env("record", tmp_path, FAKE_DEVICE_LOG=str(log)))
    assert r.code == 0, r.text
    facts = json.loads(log.read_text())
    assert facts["device"] == "cpu" and facts["dtypes"] == ["float32"]
    # not yet confined when the device was initialised ...
    assert facts["read_grader_files"] and facts["start_process"], facts
    if CONFINABLE:  # ... and confined afterwards, before the learner's code ran
        confined = json.loads(r.out)["limits"]["confined"]
        assert confined["filesystem"] is True and confined["processes"] is True, confined


@pytest.mark.parametrize("fake,cause", [
    ("broken", "initialising the cpu device failed: RuntimeError: CUDA driver initialization failed (simulated error 304)"),
    ("dies", "the worker process exited with code 9 before your file was loaded"),
    ("fails_in_set_up", "the worker process ended while it set up for your file, before any of it ran"),
    ("exits_in_set_up", "the worker process ended while it set up for your file, before any of it ran"),
])
def test_worker_that_cannot_start_is_not_a_verdict(cli, workdir, tmp_path, torchcode_home, fake, cause):
    scratch, mark = tmp_path / "tmp", uuid.uuid4().hex
    scratch.mkdir()
    shutil.copy(ROOT / "solutions" / "sdpa.py", workdir / "sdpa.py")
    env = fake_env(fake, tmp_path, TMPDIR=str(scratch), TORCHCODE_TEST_MARK=mark)
    for args in (["check", "sdpa", "--device", "cpu"], ["check", "sdpa", "--device", "cpu", "--json"]):
        r = cli(*args, env=env)
        assert r.code == 2, r.text
        said = json.loads(r.out)["error"] if "--json" in args else r.err  # --json: the error as a JSON object
        assert cause in said and "not with your code; nothing was recorded" in said, r.text
        assert "Traceback" not in r.text and "Crashed" not in r.text
        assert r.out == "" if "--json" not in args else json.loads(r.out)["exit_code"] == 2
    store = torchcode_home / "progress.sqlite3"
    assert not store.exists() or sqlite3.connect(store).execute("SELECT COUNT(*) FROM attempts").fetchone() == (0,)
    assert list(scratch.iterdir()) == []  # the worker's temporary directory is gone
    assert _processes_marked(mark) == []  # no worker or zygote left behind


def _processes_marked(mark: str) -> list[int]:
    found = []
    for d in Path("/proc").iterdir():
        try:
            if d.name.isdigit() and f"TORCHCODE_TEST_MARK={mark}".encode() in (d / "environ").read_bytes():
                found.append(int(d.name))
        except OSError:
            continue
    return found


def test_out_of_file_descriptors_is_a_grader_error(grader, catalog, monkeypatch):
    def no_fds():
        raise OSError(errno.EMFILE, "Too many open files")

    monkeypatch.setattr(socket, "socketpair", no_fds)
    with pytest.raises(GraderError, match="Too many open files"):
        grader.grade(catalog.get("sdpa"), catalog.get("sdpa").solution_path)


def test_lost_zygote_is_a_grader_error(catalog):
    from torchcode.grader.judge import Grader

    g = Grader()  # a second grader in this process: its zygote is a fresh interpreter
    try:
        os.kill(g.zygote.pid, 9)
        os.waitpid(g.zygote.pid, 0)
        with pytest.raises(GraderError, match="zygote"):
            g.grade(catalog.get("sdpa"), catalog.get("sdpa").solution_path)
    finally:
        g.close()


def test_a_worker_gone_before_its_file_is_sent_is_still_a_clear_start_failure(grader, catalog, tmp_path, monkeypatch):
    """Under load the worker can fail and close its socket before the grader sends it the file to load: that
    send must not raise (a BrokenPipeError reaching the CLI made it exit 1 without a word); the worker's own
    reason is read next."""
    import select
    import time

    from torchcode.grader.limits import Limits

    spec = catalog.get("sdpa")  # (the shared grader's zygote has tests/ on its path, not tests/fixtures)
    old, grader.limits = grader.limits, Limits(device="cpu", device_init="fixtures.fake_device:broken")
    (tmp_path / "w").mkdir()
    try:
        worker = grader._spawn(spec, ROOT / "solutions" / "sdpa.py", tmp_path / "w", ["float32"])
        hangup = select.poll()
        hangup.register(worker.sock, select.POLLRDHUP)
        deadline = time.monotonic() + 60
        while not hangup.poll(100) and time.monotonic() < deadline:
            pass  # until the worker has said why it cannot start, and closed its end
        assert hangup.poll(0), "the worker did not close its end"
        grader._send_load(worker, spec, ROOT / "solutions" / "sdpa.py")  # raised BrokenPipeError
        with pytest.raises(GraderError, match="simulated error 304"):
            grader._started(worker)
    finally:
        grader.limits = old


HOARDER = '''
import torch

_kept = []


def scaled_dot_product_attention(Q, K, V, mask=None):
    _kept.append(torch.ones(100_000_000))  # 400 MB more each call, kept: every page written
    s = Q @ K.transpose(-2, -1) / Q.shape[-1] ** 0.5
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return s.softmax(-1) @ V
'''

# the same, held in a shared anonymous mapping (Python's mmap.mmap(-1, n) is MAP_SHARED): the kernel counts such
# pages as shared memory (RssShmem), beside the pages of mapped files that the watch leaves out
SHARED_HOARDER = HOARDER.replace("import torch\n", "import mmap\n\nimport torch\n").replace(
    "_kept.append(torch.ones(100_000_000))", "_kept.append(mmap.mmap(-1, 400 << 20)); _kept[-1][::4096] = b'x' * (100 << 10)")  # every page written


def grade_hoarder(grader, catalog, tmp_path, source: str, device: str):
    """Grade ``source`` as sdpa on ``device`` with a 300 MB memory limit; the memory watch must be on."""
    from torchcode.grader.limits import Limits

    path = tmp_path / "hoard.py"
    path.write_text(source)
    old, grader.limits = grader.limits, Limits(device=device, memory_mb=300)
    try:
        report = grader.grade(catalog.get("sdpa"), path, seed=1)
    finally:
        grader.limits = old
    assert report.limits["confined"].get("memory") is True, report.limits
    return report


@pytest.mark.parametrize("source", [HOARDER, SHARED_HOARDER], ids=["anonymous", "shared_anonymous"])
def test_memory_is_bounded_where_no_address_space_limit_can_be_set(grader, catalog, tmp_path, monkeypatch, source):
    """On CUDA the worker maps far more address space than it uses, so its memory limit cannot be an
    RLIMIT_AS: the grader watches the memory it holds from /proc instead, and kills it past the limit with
    a memory-limit verdict. The CPU stands in here for such a device: its address-space limit is left off."""
    from torchcode.grader import judge
    from torchcode.grader.result import Verdict

    monkeypatch.setattr(judge, "bounds_address_space", lambda device: False)
    report = grade_hoarder(grader, catalog, tmp_path, source, "cpu")
    bad = [c for c in report.cases if c.verdict is Verdict.MEMORY_LIMIT]
    assert report.verdict is Verdict.MEMORY_LIMIT and bad, [(c.name, c.verdict, c.message) for c in report.cases]
    assert "more memory than at its start" in bad[0].message and "limit of 300 MB" in bad[0].message, bad[0].message


# files in the scratch directory, each mapped, closed and unlinked: gone from the folder the grader lists and from
# the descriptors, and file pages (not anonymous memory) once mapped; held while the mapping lives
MAPPED_HOARDER = HOARDER.replace("import torch\n", "import mmap\nimport os\n\nimport torch\n").replace(
    "_kept.append(torch.ones(100_000_000))", """for i in range(48):  # 384 MB, 8 MB a file (RLIMIT_FSIZE)
        fd = os.open(f"kept{len(_kept)}", os.O_RDWR | os.O_CREAT, 0o600)
        os.ftruncate(fd, 8 << 20)
        _kept.append(mmap.mmap(fd, 8 << 20))
        _kept[-1][::4096] = b"x" * 2048  # every page written
        os.close(fd)
        os.unlink(f"kept{len(_kept) - 1}")""")


def test_scratch_files_unlinked_while_mapped_still_count(grader, catalog, tmp_path, monkeypatch):
    """Where no address-space limit is set (CUDA), a file written in the scratch directory, mapped, closed and
    unlinked stayed held (disk, or memory on a tmpfs) and was counted by nothing: not the folder's listing, not
    the anonymous memory the watch reads. The scratch watch counts what the worker still maps from there."""
    from torchcode.grader import judge
    from torchcode.grader.result import Verdict

    monkeypatch.setattr(judge, "bounds_address_space", lambda device: False)
    report = grade_hoarder(grader, catalog, tmp_path, MAPPED_HOARDER, "cpu")
    bad = [c for c in report.cases if c.verdict is Verdict.MEMORY_LIMIT]
    assert report.verdict is Verdict.MEMORY_LIMIT and bad, [(c.name, c.verdict, c.message) for c in report.cases]
    assert "deleted but still open" in bad[0].message and "300 MB" in bad[0].message, bad[0].message


def test_the_memory_watch_starts_before_the_learners_file_is_imported(grader, catalog, tmp_path, monkeypatch):
    """The memory watch measured the worker's starting memory only once the first case was built, while the
    learner's file could already be importing (the load was sent first, so that the import overlapped the
    build): whatever the import allocated by then became the baseline, never counted (a slow first case, as a
    large reference takes on a GPU, let a file holding 1.2 GB at its top level pass a 300 MB limit). The
    baseline is now read before the file is sent to the worker."""
    from torchcode.grader import judge, sandbox
    from torchcode.grader.result import Verdict

    events = []
    send_load, watch_memory = judge.Grader._send_load, sandbox.WorkerProcess.watch_memory

    def load(self, *args, **kwargs):
        events.append("load")
        return send_load(self, *args, **kwargs)

    def watch(self, *args, **kwargs):
        events.append("watch")
        return watch_memory(self, *args, **kwargs)

    monkeypatch.setattr(judge, "bounds_address_space", lambda device: False)
    monkeypatch.setattr(judge.Grader, "_send_load", load)
    monkeypatch.setattr(sandbox.WorkerProcess, "watch_memory", watch)
    report = grade_hoarder(grader, catalog, tmp_path, HOARDER, "cpu")
    assert report.verdict is Verdict.MEMORY_LIMIT, (report.verdict, report.message)
    assert events == ["watch", "load"], events


def test_memory_held_as_the_worker_replies_counts_between_two_polls(grader, catalog, tmp_path, monkeypatch):
    """The memory watch polls (every 50 ms): memory taken and still held when the worker replied, but after the
    last poll, was never seen, and in the last case never would be (the worker is ended at once). Here the polls
    are an hour apart: what the worker holds as it replies is read then too."""
    from torchcode.grader import judge, sandbox
    from torchcode.grader.result import Verdict

    watch_memory = sandbox.WorkerProcess.watch_memory
    monkeypatch.setattr(judge, "bounds_address_space", lambda device: False)
    monkeypatch.setattr(sandbox.WorkerProcess, "watch_memory", lambda self, n, every=0: watch_memory(self, n, 3600))
    report = grade_hoarder(grader, catalog, tmp_path, HOARDER, "cpu")
    bad = [c for c in report.cases if c.verdict is Verdict.MEMORY_LIMIT]
    assert report.verdict is Verdict.MEMORY_LIMIT and bad, [(c.name, c.verdict, c.message) for c in report.cases]


# A custom autograd Function whose backward calls torch.autograd.grad with a tensor: torch imports
# symbolic_shapes (and sympy) on the first such call. It fails if that import was left to its first case.
RECOMPUTING = '''import math
import sys

import torch


class _Attention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, Q, K, V, mask):
        ctx.save_for_backward(Q, K, V)
        ctx.mask = mask
        return _attend(Q, K, V, mask).detach()

    @staticmethod
    def backward(ctx, g):
        if "torch.fx.experimental.symbolic_shapes" not in sys.modules:
            raise RuntimeError("the one-time import is paid inside a case")
        with torch.enable_grad():
            q, k, v = (t.detach().requires_grad_() for t in ctx.saved_tensors)
            return (*torch.autograd.grad(_attend(q, k, v, ctx.mask), (q, k, v), g), None)


def _attend(Q, K, V, mask):
    s = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return torch.softmax(s, dim=-1) @ V


def scaled_dot_product_attention(Q, K, V, mask=None):
    return _Attention.apply(Q, K, V, mask)
'''


def test_one_time_imports_of_a_backward_are_paid_while_loading_not_in_a_case(grader, catalog, tmp_path):
    """torch.autograd.grad given a tensor imports sympy on first use (0.3-0.7 s, over a second under load): a
    recomputing backward's first case took that against its time limit (flash_through_dlpack's one_tile hit a
    1 s limit in CI). A file that names a backward has it imported while it loads."""
    path = tmp_path / "recompute.py"
    path.write_text(RECOMPUTING)
    report = grader.grade(catalog.get("sdpa"), path, seed=3)
    assert report.passed, [(c.name, c.verdict, c.message) for c in report.cases if not c.passed][:2]


def test_a_cpu_worker_hides_the_gpus_before_anything_asks_for_them(grader, catalog, tmp_path):
    """On a machine with a GPU, a CPU worker's first backward asked CUDA how many devices there are, which its
    confinement forbids: torch printed "CUDA initialization: Unexpected error from cudaGetDeviceCount()" into
    the learner's output (seen on an H100 machine). The worker hides the GPUs before CUDA can initialise."""
    path = tmp_path / "sdpa.py"
    path.write_text((ROOT / "solutions" / "sdpa.py").read_text() + "\nimport os as _os\n"
                    "print('SEEN', repr(_os.environ.get('CUDA_VISIBLE_DEVICES')), torch.cuda.device_count())\n")
    report = grader.grade(catalog.get("sdpa"), path, seed=1)
    assert report.passed, report.message
    assert report.output.startswith("SEEN '' 0"), report.output


def test_the_zygotes_meta_warm_up_runs_no_backward():
    """The zygote loads the meta device's kernels once for the GPU dry runs. A backward there, on a machine with
    a GPU, initialised CUDA in the zygote and started autograd's device threads: every worker forked afterwards
    failed ("warming up torch failed: Unable to handle autograd's threading in combination with fork-based
    multiprocessing"; with CUDA, "initialization error"), so `grade`, `watch` and `validate` with a GPU dry run
    graded nothing on an H100 machine."""
    code = ("import torch\nfrom torchcode.grader import portable\n"
            "def refuse(*a, **k):\n    raise SystemExit('a backward ran')\n"
            "torch.autograd._engine_run_backward = refuse\n"  # where backward() and autograd.grad() both go
            "portable.warm()\nprint('warm', torch.cuda.is_initialized())\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and p.stdout.strip() == "warm False", p.stdout + p.stderr


def test_a_device_side_assert_is_the_learners_runtime_error_not_a_silent_worker(cli, workdir, tmp_path):
    """On an H100, a kernel indexing past the end (repeat_kv/wrong/index_cached_by_n_rep.py) was "Crashed: exited
    with code 0 without returning a result": CUDA reported the assert late, when the grader read the output, and the
    next case's inputs could not reach the device; that error escaped the worker. Both are the learner's runtime
    error now, with what to do about it. (A fake device raises as CUDA does.)"""
    shutil.copy(ROOT / "solutions" / "sdpa.py", workdir / "sdpa.py")
    r = cli("check", "sdpa", "--device", "cpu", "--json", env=fake_env("asserts_after_a_call", tmp_path))
    report = json.loads(r.out)
    assert r.code == 1 and report["verdict"] == "runtime_error", r.text
    assert "device-side assert triggered" in report["message"] and "index out of range" in report["message"]
    failed = [c for c in report["cases"] if c["verdict"] != "accepted"]
    assert len(failed) >= 2 and all(c["verdict"] == "runtime_error" for c in failed), failed
    assert "Crashed" not in r.text and "exited with code" not in r.text


def test_a_second_grader_in_one_process_starts_a_fresh_zygote(grader, catalog, tmp_path, monkeypatch):
    """The first grader forks its zygote from this process (a torch import saved); later ones may not: this
    process has computed since (on a GPU machine its backward started a thread per device, after which every
    backward of a forked worker failed, and CUDA used here cannot be used in a forked child: `grade_file` twice on
    CUDA graded nothing the second time). Their zygote is a fresh interpreter, which grades the same."""
    from torchcode.grader.judge import Grader

    spec = catalog.get("sdpa")
    assert not grader.zygote.fresh  # conftest's, made before any tensor op
    # nothing of the working directory runs in it (python -c would import this json.py first), and a Path on
    # sys.path (a notebook adds them) is no obstacle
    (tmp_path / "json.py").write_text(f"open({str(tmp_path / 'ran')!r}, 'w').close()\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [*sys.path, tmp_path])
    with Grader() as g:
        assert g.zygote.fresh
        right = g.grade(spec, spec.solution_path, seed=5)
        with open(f"/proc/{g.zygote.pid}/cmdline", "rb") as f:  # an interactive python's, naming no grader
            assert f.read() == os.path.basename(sys.executable).encode() + b"\0"
        wrong = g.grade(spec, ROOT / "problems" / "sdpa" / "wrong" / "scale_by_dk.py", seed=5)
        assert right.passed and wrong.verdict.value == "wrong_answer", (right.message, wrong.message)
        assert right.limits["confined"] == grader.grade(spec, spec.solution_path, seed=5).limits["confined"]
        pid = g.zygote.pid
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # reaped when the grader closed
    assert not (tmp_path / "ran").exists()

"""Kernel confinement, tested directly in forked children (no torch runs there): the Landlock allow-list
never follows a symlink, the terminal is out of reach, seccomp refuses foreign system call ABIs, new
processes and threads, and signals to anyone but the worker itself."""

from __future__ import annotations

import ctypes
import errno
import json
import mmap
import os
import platform
import pty
import signal
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from conftest import FIXTURES
from torchcode.grader import confine

LINUX = sys.platform == "linux"
LANDLOCK = LINUX and confine._abi() >= 1
SECCOMP = LINUX and platform.machine() in confine.ARCHES
needs_landlock = pytest.mark.skipif(not LANDLOCK, reason="this kernel has no Landlock")
needs_seccomp = pytest.mark.skipif(not SECCOMP, reason="no seccomp filter for this platform")


def in_child(body) -> tuple[dict, int]:
    """Run ``body()`` (returns a dict) in a forked child; return its result and its wait status."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            out = body()
        except BaseException as e:  # noqa: BLE001
            out = {"error": repr(e)}
        os.write(w, json.dumps(out).encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        data = f.read()
    _, status = os.waitpid(pid, 0)
    return (json.loads(data) if data else {}), status


def attempt(fn) -> str:
    try:
        fn()
        return "ok"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
    except RuntimeError as e:
        return f"RuntimeError: {e}"


@pytest.fixture
def tree(tmp_path):
    """real/secret/x (protected), real/other/y, lib64 -> real, shortcut -> real/secret, scratch/."""
    real = tmp_path / "real"
    (real / "secret").mkdir(parents=True)
    (real / "other").mkdir()
    (real / "secret" / "x").write_text("hidden")
    (real / "other" / "y").write_text("fine")
    (tmp_path / "lib64").symlink_to("real")
    (tmp_path / "shortcut").symlink_to(real / "secret")
    (tmp_path / "scratch").mkdir()
    return tmp_path


def test_the_allow_list_never_holds_a_symlink_nor_dev(tree):
    allowed = confine.allow_list([str(tree / "real" / "secret")])
    assert str(tree / "real" / "other") in allowed
    for p in ("lib64", "shortcut", "real", "real/secret"):
        assert str(tree / p) not in allowed
    assert "/dev" not in allowed and not any(p.startswith("/dev/") for p in allowed)
    assert not any(os.path.islink(p) for p in allowed)


@needs_landlock
def test_landlock_keeps_protected_files_out_of_reach_whatever_the_path(tree):
    master, slave = pty.openpty()
    terminal = os.ttyname(slave)
    parent = os.getpid()

    def body():
        abi = confine.restrict_filesystem([str(tree / "real" / "secret")], [], [str(tree / "scratch")])
        return {
            "abi": abi,
            "via lib64": attempt(lambda: open(tree / "lib64" / "secret" / "x").read()),
            "real path": attempt(lambda: open(tree / "real" / "secret" / "x").read()),
            "via shortcut": attempt(lambda: open(tree / "shortcut" / "x").read()),
            "allowed via lib64": attempt(lambda: open(tree / "lib64" / "other" / "y").read()),
            "write outside scratch": attempt(lambda: open(tree / "real" / "other" / "z", "w").close()),
            "write scratch": attempt(lambda: open(tree / "scratch" / "z", "w").close()),
            "dev null": attempt(lambda: open("/dev/null", "w").write("x")),
            "dev urandom": attempt(lambda: open("/dev/urandom", "rb").read(4)),
            "terminal": attempt(lambda: os.close(os.open(terminal, os.O_WRONLY | os.O_NOCTTY))),
            "dev tty": attempt(lambda: os.close(os.open("/dev/tty", os.O_WRONLY | os.O_NOCTTY))),
            "signal the parent": attempt(lambda: os.kill(parent, 0)),
        }

    try:
        out, status = in_child(body)
    finally:
        os.close(master)
        os.close(slave)
    assert out["abi"] >= 1, out
    denied = {"via lib64", "real path", "via shortcut", "write outside scratch", "terminal", "dev tty"}
    assert {k for k, v in out.items() if v == "EACCES"} == denied, out
    assert all(out[k] == "ok" for k in ("allowed via lib64", "write scratch", "dev null", "dev urandom")), out
    assert out["signal the parent"] == ("EPERM" if out["abi"] >= 6 else "ok"), out  # Landlock scoping, ABI 6+


def _machine_code(code: bytes):
    buf = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    buf.write(code)
    fn = ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(buf)))
    fn.buf = buf
    return fn


INT80_GETPID = b"\xb8\x14\x00\x00\x00\xcd\x80\xc3"  # mov eax, 20 (getpid, i386); int 0x80; ret
X32_GETPID = b"\xb8" + (0x40000000 | 39).to_bytes(4, "little") + b"\x0f\x05\xc3"  # x32 getpid via syscall


@needs_seccomp
def test_seccomp_refuses_processes_threads_and_signals_but_not_ordinary_work(tmp_path):
    import fcntl
    import socket

    parent = os.getpid()
    victim = tmp_path / "victim.txt"
    victim.write_text("a file of the user's")
    before = victim.stat()

    def body():
        assert confine.seccomp(threads=False)
        t = threading.Thread(target=lambda: None)
        fd = os.open(victim, os.O_RDONLY)
        return {
            "chmod": attempt(lambda: os.chmod(victim, 0)),
            "chmod folder": attempt(lambda: os.chmod(tmp_path, 0)),
            "fchmod": attempt(lambda: os.fchmod(fd, 0)),
            "chown": attempt(lambda: os.chown(victim, os.getuid(), os.getgid())),
            "lchown": attempt(lambda: os.lchown(victim, os.getuid(), os.getgid())),
            "fchown": attempt(lambda: os.fchown(fd, os.getuid(), os.getgid())),
            "utime": attempt(lambda: os.utime(victim, (0, 0))),
            "utime now": attempt(lambda: os.utime(victim)),
            "futime": attempt(lambda: os.utime(fd, (0, 0))),
            "setxattr": attempt(lambda: os.setxattr(victim, "user.x", b"1")),
            "removexattr": attempt(lambda: os.removexattr(victim, "user.x")),
            "fork": attempt(os.fork),
            "exec": attempt(lambda: os.execv("/bin/true", ["true"])),
            "thread": attempt(t.start),
            "kill parent": attempt(lambda: os.kill(parent, 0)),
            "stop parent": attempt(lambda: os.kill(parent, signal.SIGSTOP)),
            "kill everyone": attempt(lambda: os.kill(-1, 0)),
            "F_SETOWN parent": attempt(lambda: fcntl.fcntl(socket.socketpair()[0].fileno(), fcntl.F_SETOWN, parent)),
            "inet socket": attempt(lambda: socket.socket(socket.AF_INET)),
            "unix socket": attempt(lambda: socket.socket(socket.AF_UNIX)),
            "socketpair": attempt(lambda: [s.close() for s in socket.socketpair()]),
            "datagram socketpair": attempt(lambda: socket.socketpair(type=socket.SOCK_DGRAM)),
            "kill self": attempt(lambda: os.kill(os.getpid(), 0)),
            "raise": attempt(lambda: signal.raise_signal(signal.SIGWINCH)),
            "file io": attempt(lambda: open("/proc/self/status").read()),
        }

    out, status = in_child(body)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, (status, out)
    refused = {"fork", "exec", "kill parent", "stop parent", "kill everyone", "F_SETOWN parent", "datagram socketpair",
               "chmod", "chmod folder", "fchmod", "chown", "lchown", "fchown", "utime", "utime now", "futime",
               "setxattr", "removexattr"}  # a file's mode, owner, times, attributes: no Landlock right covers them
    assert {k for k, v in out.items() if v == "EPERM"} == refused, out
    after = victim.stat()
    assert (after.st_mode, after.st_mtime_ns, after.st_atime_ns) == (before.st_mode, before.st_mtime_ns,
                                                                       before.st_atime_ns)
    assert out["thread"].startswith("RuntimeError"), out
    assert all(out[k] == "ok" for k in ("kill self", "raise", "file io", "socketpair")), out
    assert out["inet socket"] == out["unix socket"] == "EACCES", out  # no network, no other program's socket


@needs_seccomp
def test_seccomp_allows_threads_when_asked():
    def body():
        assert confine.seccomp(threads=True)
        t = threading.Thread(target=lambda: None)
        return {"thread": attempt(t.start), "fork": attempt(os.fork)}

    out, _ = in_child(body)
    assert out == {"thread": "ok", "fork": "EPERM"}


@pytest.mark.skipif(not SECCOMP or platform.machine() != "x86_64", reason="x86_64 only")
@pytest.mark.parametrize("code", [INT80_GETPID, X32_GETPID], ids=["int 0x80", "x32"])
def test_foreign_system_call_abis_kill_the_process(code):
    unconfined, status = in_child(lambda: {"pid": _machine_code(code)(), "me": os.getpid()})
    if code is INT80_GETPID and not (os.WIFEXITED(status) and unconfined.get("pid") == unconfined.get("me")):
        pytest.skip("this kernel has no 32-bit syscall emulation")  # then int 0x80 cannot fork anything either

    def body():
        assert confine.seccomp(threads=False)
        return {"pid": _machine_code(code)()}

    out, status = in_child(body)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGSYS, (status, out)


SDPA = """

def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ V
"""


@pytest.mark.skipif(not (LANDLOCK or SECCOMP), reason="this kernel has neither Landlock nor seccomp")
def test_a_grade_leaves_nothing_in_dev_shm_and_reaches_no_network(cli, workdir):
    """One real check of a correct kernel whose file, as it loads, tries both (each attempt on its own):

    /dev/shm is shared by every process and its files outlive the worker: a grade on the CPU may not write
    there (in a warm session it would leave files for the next grade, another student's in `grade`, or fill
    the machine's memory with them). (Landlock)

    It may read much of the machine (all but the protected trees): in `torchcode grade` a student's code could
    send the instructor's files away. Every socket but a unix one is refused; the grade goes on. (seccomp)"""
    import socket

    marker = f"torchcode-test-shm-{os.getpid()}"
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    (workdir / "sdpa.py").write_text(f'''import math
import socket
import torch

try:
    with open("/dev/shm/{marker}", "wb") as f:
        f.write(b"left for the next grade")
    print("shm: written")
except OSError as e:
    print("shm: refused", e)

for family, kind in ((socket.AF_INET, socket.SOCK_STREAM), (socket.AF_INET, socket.SOCK_DGRAM),
                     (socket.AF_INET6, socket.SOCK_STREAM)):
    try:
        s = socket.socket(family, kind)
        s.settimeout(3)
        s.connect(("127.0.0.1", {port}) if family == socket.AF_INET else ("::1", {port}))
        s.sendall(b"stolen")
        print("net: sent")
    except OSError as e:
        print("net: refused", e.errno)
''' + SDPA)
    try:
        r = cli("check", "sdpa.py", "-p", "sdpa", "--device", "cpu", "--json")
        report = json.loads(r.out)
        if SECCOMP:
            with pytest.raises(socket.timeout):
                listener.accept()
        assert report["verdict"] == "accepted", r.text  # refused, not a crash: the kernel itself is right
        if LANDLOCK:
            assert "shm: refused" in report["output"] and not os.path.exists(f"/dev/shm/{marker}"), report["output"]
        if SECCOMP:
            assert report["output"].count("net: refused 13") == 3 and "sent" not in report["output"], report["output"]
    finally:
        listener.close()
        if os.path.exists(f"/dev/shm/{marker}"):
            os.unlink(f"/dev/shm/{marker}")


@needs_landlock
def test_temporary_files_and_kernel_caches_go_to_the_scratch_directory(grader, catalog):
    """tempfile, Triton/Inductor (behind torch.compile and checkpoint) and the CUDA driver write under /tmp
    and the home directory by default, which confinement leaves read-only: the worker points them at its
    scratch directory, removed after the grade."""
    tmp = Path(tempfile.gettempdir())
    before = set(os.listdir(tmp))
    report = grader.grade(catalog.get("sdpa"), FIXTURES / "sdpa_through_tempfile.py", seed=1)
    assert report.passed, report.message
    assert report.limits["confined"]["filesystem"]
    # what the file wrote, anywhere new in /tmp (other tests, run beside this one, make tmp... files there too, and
    # so does the grader for its workers: tempfile's own names)
    written = [p for n in set(os.listdir(tmp)) - before for p in _files(tmp / n) if p.name in ("scores.pt", "note")]
    assert not written, written


def _files(top: Path) -> list[Path]:
    try:
        return [top] if top.is_file() else list(top.rglob("*"))
    except OSError:  # removed meanwhile by its owner
        return []


@needs_landlock
def test_a_submission_reads_no_file_of_the_user_outside_its_folder(cli, workdir, tmp_path):
    """In `torchcode grade` a submission's report goes back to its student: it must not be able to print the
    instructor's files (their home, /tmp, the folder grading started in). It may read the system, Python and
    its packages, and its own folder."""
    secret = tmp_path / "elsewhere" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("instructor's secret")
    in_home = Path.home() / f".torchcode-test-secret-{os.getpid()}"
    in_home.write_text("instructor's home secret")
    started_in = workdir / "started_in.txt"
    started_in.write_text("next to where grading started")
    sub = workdir / "student"
    sub.mkdir()
    (sub / "helper.py").write_text("SCALE = 1.0\n")
    (sub / "sdpa.py").write_text(f'''import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from helper import SCALE  # its own folder: readable

for name in {[str(secret), str(in_home), str(started_in), "/etc/hostname", torch_file()]!r}:
    try:
        open(name).read()
        print("read", name)
    except OSError as e:
        print("refused", name, e.errno)


def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1)) * SCALE
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ V
''')
    try:
        r = cli("check", "student/sdpa.py", "-p", "sdpa", "--device", "cpu", "--json")
        report = json.loads(r.out)
    finally:
        in_home.unlink()
    assert report["verdict"] == "accepted", r.text
    out = report["output"]
    for name in (secret, in_home, started_in):
        assert f"refused {name} {errno.EACCES}" in out, out
    assert "read /etc/hostname" in out and "read " + torch_file() in out, out


def torch_file() -> str:
    import torch

    return torch.__file__


@needs_seccomp
def test_a_refused_change_of_a_files_mode_says_what_to_use(cli, workdir):
    """shutil.copy copies the mode (chmod), which the sandbox refuses: the learner is told to use copyfile."""
    (workdir / "sdpa.py").write_text('''import math, os, shutil, tempfile

import torch

folder = tempfile.mkdtemp()
with open(os.path.join(folder, "a"), "w") as f:
    f.write("x")
shutil.copy(os.path.join(folder, "a"), os.path.join(folder, "b"))


def scaled_dot_product_attention(Q, K, V, mask=None):
    s = Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1))
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return torch.softmax(s, -1) @ V
''')
    r = cli("check", "sdpa.py", "--device", "cpu", "--json")
    report = json.loads(r.out)
    assert report["verdict"] == "runtime_error", r.text
    assert "may not change a file's permissions" in report["message"] and "shutil.copyfile" in report["message"], r.text

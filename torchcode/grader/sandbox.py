"""Process isolation: a zygote that forks one sandboxed worker per submission.

Forking a process that has imported torch costs a fraction of a second, but forking
one that has already *computed* can hang (OpenMP state; see shared GRADING.md). So
right after ``import torch``, before any tensor op, the trusted process forks a
*zygote* that never computes; every worker is forked from it. Grading N submissions
costs one torch import plus N cheap forks, and the trusted process is free to run
the reference kernels.

The zygote also reaps workers with ``wait4``, so exit status, CPU time and peak
memory come from the kernel, not from anything the learner's process says.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import sys
import threading
import time
from dataclasses import dataclass

from torchcode.grader import protocol
from torchcode.grader.tree import CHECK_FOLDER, SCRATCH, remove_tree

_LEN = struct.Struct("!I")


@dataclass
class ExitInfo:
    exit_code: int | None  # None when killed by a signal
    signal: int | None
    cpu_seconds: float
    max_rss_mb: float
    killed_by_us: bool = False

    def describe(self) -> str:
        if self.signal is not None:
            name = signal.Signals(self.signal).name if self.signal in signal.Signals._value2member_map_ else str(self.signal)
            hint = {"SIGSEGV": " (a segmentation fault)", "SIGKILL": " (killed: often out of memory)",
                    "SIGABRT": " (aborted)", "SIGBUS": " (bus error)",
                    "SIGSYS": " (a system call the sandbox refuses: 32-bit or x32 system calls)"}.get(name, "")
            return f"killed by signal {name}{hint}"
        return f"exited with code {self.exit_code}"


def _send_json(sock: socket.socket, obj: dict, fds: list[int] | None = None) -> None:
    data = json.dumps(obj).encode()
    if fds:
        socket.send_fds(sock, [_LEN.pack(len(data)) + data], fds)
    else:
        sock.sendall(_LEN.pack(len(data)) + data)


def _recv_json(sock: socket.socket, with_fds: bool = False):
    if with_fds:
        data, fds, _, _ = socket.recv_fds(sock, 1 << 16, 4)
        if not data:
            raise EOFError
        n = _LEN.unpack(data[:4])[0]
        body = data[4:]
        while len(body) < n:
            more = sock.recv(n - len(body))
            if not more:
                raise EOFError
            body += more
        return json.loads(body), fds
    head = protocol._recv_exact(sock, 4, None)
    return json.loads(protocol._recv_exact(sock, _LEN.unpack(head)[0], None)), []


def _wait(pid: int, grace: float) -> ExitInfo:
    """Wait for ``pid`` (a child of the caller) up to ``grace`` seconds, then kill its group."""
    deadline = time.monotonic() + grace
    killed = False
    while True:
        try:
            wpid, status, ru = os.wait4(pid, os.WNOHANG)
        except ChildProcessError:
            return ExitInfo(None, None, 0.0, 0.0)
        if wpid:
            break
        if time.monotonic() >= deadline and not killed:
            _killpg(pid)
            killed = True
        time.sleep(0.005)
    _killpg(pid)  # anything the submission forked into its group
    sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else None
    return ExitInfo(code, sig, ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024, killed)


def _killpg(pid: int) -> None:
    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _zygote_loop(sock: socket.socket) -> None:
    """Runs in the zygote: fork workers on request, reap them, report how they ended.

    If the trusted process goes away mid-check (its end of the socket closes, or it is killed and
    we get SIGTERM), the workers are killed and their temporary directories removed here."""
    from torchcode.grader import guards, reflection, worker

    _as_plain_python()
    guards.warm()  # every worker inherits the lookup tables its guards need
    reflection.install()  # and the wrappers that refuse reflection once a worker arms them
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the trusted process handles Ctrl-C
    signal.signal(signal.SIGTERM, _exit_on_signal)
    children: dict[int, str] = {}  # pid -> its temporary directory
    try:
        while True:
            try:
                req, fds = _recv_json(sock, with_fds=True)
            except (EOFError, OSError, ValueError):
                break
            if req.get("op") == "spawn":
                try:
                    pid = os.fork()
                except OSError as e:  # out of processes or memory: the trusted side says so
                    pid = None
                    _send_json(sock, {"error": f"cannot fork a worker: {e}"})
                if pid == 0:
                    sock.close()
                    os.setsid()
                    worker.main(fds[0], req["config"])  # never returns
                for fd in fds:
                    os.close(fd)
                if pid is not None:
                    children[pid] = str(req["config"].get("tmp") or "")
                    _send_json(sock, {"pid": pid})
            elif req.get("op") == "warm_meta":  # workers forked from now on start with the meta kernels loaded
                from torchcode.grader import portable

                portable.warm()
                _send_json(sock, {"ok": True})
            elif req.get("op") == "wait":
                pid = int(req["pid"])
                info = _wait(pid, float(req.get("grace", 1.0))) if pid in children else ExitInfo(None, None, 0, 0)
                children.pop(pid, None)
                _send_json(sock, info.__dict__)
            else:
                break
    except SystemExit:
        pass
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        for pid, tmp in children.items():
            _killpg(pid)
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
            if tmp and os.path.basename(tmp).startswith(SCRATCH):
                remove_tree(tmp)  # the trusted process died before it could
                parent = os.path.dirname(tmp)
                if parent in CHECK_FOLDER:  # `check`'s own folder, now empty
                    try:
                        os.rmdir(parent)
                    except OSError:
                        pass
        os._exit(0)


def _as_plain_python() -> None:
    """This process's name and command line as an interactive `python` shows them, in /proc/self/comm and cmdline
    (ps too), for every worker forked from it: `torchcode` and `torchcode check FILE --seed N` named the grader to the
    learner's file. (The trusted process's own, its parent's, stay as they are: docs/grading.md.)"""
    name = (os.path.basename(sys.executable) or "python").encode()
    try:
        import ctypes

        ctypes.CDLL(None).prctl(15, ctypes.c_char_p(name[:15]), 0, 0, 0)  # PR_SET_NAME
        with open("/proc/self/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        start, end = int(fields[45]), int(fields[46])  # arg_start, arg_end: the process's argv strings
        if end - start > len(name) + 1:
            # the area's last byte not NUL: the kernel then reads the command line up to its first NUL
            ctypes.memmove(start, (name + b"\0").ljust(end - start, b" "), end - start)
    except (OSError, AttributeError, ValueError, IndexError):
        pass


def _exit_on_signal(signum, frame):
    raise SystemExit(128 + signum)


_STARTED = [0]  # zygotes this process has started

# The zygote as a fresh interpreter: the trusted process's sys.path, then torch imported anew there
# (-P: nothing from the working directory is imported first; dying with the trusted process comes first too)
_FRESH = ("import ctypes, json, signal, sys; sys.path[:] = json.loads(sys.argv[2])\n"
          "signal.signal(signal.SIGINT, signal.SIG_IGN)  # the trusted process handles Ctrl-C\n"
          "try:\n    ctypes.CDLL(None).prctl(1, signal.SIGTERM)\nexcept (OSError, AttributeError):\n    pass\n"
          "from torchcode.grader import sandbox; sandbox.fresh_zygote(int(sys.argv[1]))")


def _forkable() -> bool:
    """Whether the zygote may be forked from this process: only before it computed. Once it has initialised CUDA
    (which no forked child can use: "Cannot re-initialize CUDA in forked subprocess") or started a zygote before
    (it has most likely computed since: on a machine with a GPU, its first backward started a thread per device, and
    every backward in a forked child then fails), the zygote is a fresh interpreter instead (one torch import).
    Not seen: torch.cuda.is_available() asked before the first grader (it starts CUDA's driver here; a CUDA worker
    then fails to start, which is said as the grader's problem, never a verdict): make the Grader first."""
    torch = sys.modules.get("torch")
    return _STARTED[0] == 0 and not (torch is not None and torch.cuda.is_initialized())


def _die_with_parent() -> None:
    try:
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG: clean up, then die with it
    except (OSError, AttributeError):
        pass


def fresh_zygote(fd: int) -> None:
    """The zygote's life in a fresh interpreter (``_FRESH``, which imported torch with this module); never returns."""
    try:
        _zygote_loop(socket.socket(fileno=fd))
    finally:
        os._exit(0)


class Zygote:
    """Forked right after ``import torch`` and before any tensor op in this process; a fresh interpreter where
    this process can no longer fork one safely (``_forkable``)."""

    def __init__(self):
        ours, theirs = socket.socketpair()
        self.fresh = not _forkable()
        _STARTED[0] += 1
        if self.fresh:
            import subprocess
            import tempfile

            env = dict(os.environ, TMPDIR=tempfile.gettempdir())  # where this process puts its temporary files
            path = json.dumps([p for p in sys.path if isinstance(p, str)])  # (a notebook may add a Path)
            try:
                proc = subprocess.Popen([sys.executable, "-P", "-c", _FRESH, str(theirs.fileno()), path],
                                        pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, env=env)
            except BaseException:
                ours.close()
                raise
            finally:
                theirs.close()
            proc.returncode = 0  # reaped by close(), as a forked zygote is (Popen is not to wait for it again)
            self.pid, self.sock = proc.pid, ours
            return
        pid = os.fork()
        if pid == 0:  # the zygote
            try:
                ours.close()
                _die_with_parent()
                _zygote_loop(theirs)
            finally:
                os._exit(0)
        theirs.close()
        self.pid, self.sock = pid, ours

    def spawn(self, config: dict) -> "WorkerProcess":
        """A new worker. OSError or EOFError: no worker (out of processes or descriptors, zygote gone)."""
        if self.sock is None:
            raise OSError("the zygote is closed")
        mine, theirs = socket.socketpair()
        try:
            try:
                _send_json(self.sock, {"op": "spawn", "config": config}, [theirs.fileno()])
            finally:
                theirs.close()
            reply, _ = _recv_json(self.sock)
            if "pid" not in reply:
                raise OSError(reply.get("error", "the zygote did not start a worker"))
        except (EOFError, BrokenPipeError, ConnectionResetError, protocol.PeerClosed, protocol.ProtocolError, ValueError):
            mine.close()
            raise OSError("the zygote process that starts workers is gone") from None
        except BaseException:
            mine.close()
            raise
        return WorkerProcess(self, int(reply["pid"]), mine)

    def warm_meta(self) -> None:
        """Load the meta device's kernels here once (seconds: sympy, torch._refs, dynamo's wrappers), so
        that the dry runs of every worker forked afterwards do not each pay for it. Best effort."""
        if getattr(self, "meta_warm", False) or self.sock is None:
            return
        try:
            _send_json(self.sock, {"op": "warm_meta"})
            _recv_json(self.sock)
            self.meta_warm = True
        except (OSError, EOFError, protocol.PeerClosed, protocol.ProtocolError, ValueError):
            pass

    def reap(self, pid: int, grace: float) -> ExitInfo:
        try:
            _send_json(self.sock, {"op": "wait", "pid": pid, "grace": grace})
            reply, _ = _recv_json(self.sock)
        except (OSError, AttributeError, EOFError, protocol.PeerClosed, protocol.ProtocolError, ValueError):
            _killpg(pid)  # the zygote is gone (and the worker dies with it): nothing to learn
            return ExitInfo(None, None, 0.0, 0.0)
        return ExitInfo(**reply)

    def close(self) -> None:
        if self.sock is None:
            return
        try:
            _send_json(self.sock, {"op": "exit"})
        except OSError:
            pass
        self.sock.close()
        self.sock = None
        try:
            os.waitpid(self.pid, 0)
        except ChildProcessError:
            pass


MAX_SCRATCH_FILES = 2000  # a kernel writes none; compiled-kernel caches (Triton, Inductor) a few hundred


def _tree_size(folder, most: int) -> tuple[int, int, bool]:
    """Bytes and number of the files under ``folder`` (links not followed), counting at most ``most``, and
    whether a folder there could not be listed (not one that vanished meanwhile): one named past the longest
    path the system takes, or stripped of its read permission, hides what is in it."""
    size, count, todo, blind = 0, 0, [str(folder)], False
    while todo and count < most:
        try:
            with os.scandir(todo.pop()) as it:
                for e in it:
                    count += 1
                    try:
                        if e.is_dir(follow_symlinks=False):
                            todo.append(e.path)
                        else:
                            size += e.stat(follow_symlinks=False).st_blocks * 512
                    except OSError:
                        pass
        except (FileNotFoundError, NotADirectoryError):
            pass
        except OSError:
            blind = True
    return size, count, blind


def _unlinked_bytes(pid: int, folder: str, mapped: bool) -> int:
    """Bytes of the files under ``folder`` that ``pid`` unlinked but still holds open (or, with ``mapped``,
    mapped): gone from the folder's listing, their disk (or tmpfs memory) is freed only when the worker lets
    go. Mapped files count where no address-space limit does (CUDA); elsewhere the mappings are address space."""
    prefix, seen, total = folder.rstrip("/") + "/", set(), 0

    def count(link: str, fallback: int = 0) -> None:
        nonlocal total
        try:
            st = os.stat(link)
            key, size = (st.st_dev, st.st_ino), st.st_blocks * 512
        except OSError:
            key, size = link, fallback
        if key not in seen:
            seen.add(key)
            total += size

    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        fds = []
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith(prefix) and target.endswith(" (deleted)"):
            count(f"/proc/{pid}/fd/{fd}")
    if mapped:
        try:
            with open(f"/proc/{pid}/maps", "rb") as f:
                lines = f.read().decode(errors="replace").splitlines()
        except OSError:
            lines = []
        for line in lines:
            fields = line.split(None, 5)
            if len(fields) == 6 and fields[5].startswith(prefix) and fields[5].endswith(" (deleted)"):
                start, _, end = fields[0].partition("-")
                try:
                    extent = int(end, 16) - int(start, 16) + int(fields[2], 16)
                except ValueError:
                    continue
                count(f"/proc/{pid}/map_files/{fields[0]}", extent)
    return total


def _resident_bytes(pid: int) -> int | None:
    """The memory ``pid`` holds now: its anonymous pages and its shared memory (RssAnon + RssShmem: a
    shared anonymous mapping, ``mmap.mmap(-1, n)``, is shared memory), never the pages of files it maps
    (libraries CUDA loads lazily are not the submission's); None once it is gone."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            fields = dict(line.split(b":", 1) for line in f.read().splitlines() if b":" in line)
        return sum(int(fields[k].split()[0]) for k in (b"RssAnon", b"RssShmem")) << 10  # in kB
    except (OSError, ValueError, IndexError, KeyError):
        return None


class WorkerProcess:
    """One sandboxed worker: send it messages, read replies under a deadline, end it."""

    def __init__(self, zygote: Zygote, pid: int, sock: socket.socket):
        self.zygote, self.pid, self.sock = zygote, pid, sock
        self.scratch_over = ""  # why watch_scratch killed it
        self.memory_over = ""  # why watch_memory killed it
        self._checks: list = []  # each watch's look, for over_now
        self.exit: ExitInfo | None = None
        self.received = False

    def send(self, msg: protocol.Message, header: dict) -> None:
        """Send a message. A worker that has already closed its end (it could not start, or exited) is not
        an error here: what it said before, and how it ended, are read next (a BrokenPipeError that escaped
        to the CLI made click exit 1 without a word)."""
        try:
            msg.send(self.sock, header)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def receive_first(self, seconds: float, budget: protocol.Budget, notes: protocol.Notes):
        """The worker's first message alone, sent before any learner code ran: a "ready" note (into
        ``notes``) or the reason it could not start."""
        self.received = True
        header, _ = protocol.receive(self.sock, time.monotonic() + seconds, budget)
        if "note" in header:
            notes.add(header["note"], True)
        return header, []

    def receive(self, seconds: float, budget: protocol.Budget, notes: protocol.Notes | None = None):
        """The next reply within ``seconds``, at most ``budget``; notes sent before it go to ``notes``."""
        first, self.received = not self.received, True
        return protocol.receive_reply(self.sock, time.monotonic() + seconds, budget,
                                      notes if notes is not None else protocol.Notes(), first)

    def kill(self) -> None:
        _killpg(self.pid)

    def watch_scratch(self, folder, max_bytes: int, every: float = 0.1, mapped: bool = False) -> None:
        """Kill the worker once the files under ``folder`` (its scratch directory, where temporary files
        go) hold more than ``max_bytes`` or number more than MAX_SCRATCH_FILES: disk, or memory where the
        folder is a tmpfs, that no rlimit counts (RLIMIT_FSIZE caps each file, not how many). Files it
        unlinked but still holds open (``mapped``: or mapped, where no address-space limit counts mappings)
        count too. Why it was killed is left in ``scratch_over``."""
        real = os.path.realpath(folder)

        def over():
            size, count, blind = _tree_size(folder, MAX_SCRATCH_FILES + 1)
            if count > MAX_SCRATCH_FILES:
                return f"more than {MAX_SCRATCH_FILES} files"
            if blind:
                return ("folders the grader cannot look into (a path longer than the system allows, or a folder "
                        "without read permission)")
            held = _unlinked_bytes(self.pid, real, mapped) if size <= max_bytes else 0
            if size + held <= max_bytes:
                return ""
            hidden = f" ({held / 2**20:.0f} MB of it in files deleted but still open or mapped)" if held else ""
            return f"{(size + held) / 2**20:.0f} MB in {count} files{hidden}"

        self._watch("scratch", over, every)

    def watch_memory(self, max_bytes: int, every: float = 0.05) -> bool:
        """Kill the worker once it holds ``max_bytes`` more memory than it does now: the memory limit where
        no address-space limit can be set (CUDA maps far more address space than memory). Measured from
        here, in /proc, so nothing the worker does can hide it. Why it was killed is left in
        ``memory_over``. False: it cannot be measured."""
        base = _resident_bytes(self.pid)
        if base is None:
            return False

        def over():
            held = _resident_bytes(self.pid)
            if held is None:
                return None  # gone: nothing left to watch
            return f"{(held - base) / 2**20:.0f} MB" if held - base > max_bytes else ""

        self._watch("memory", over, every)
        return True

    def _watch(self, what: str, over, every: float) -> None:
        """Poll ``over()`` from a thread until the worker is finished: a reason ('' while within bounds, None
        to stop watching) kills the worker and is left in ``{what}_over``."""
        def check() -> bool:
            why = over()
            if why:
                setattr(self, f"{what}_over", why)
                self.kill()
            return why is None or bool(why)  # done watching

        def watch():
            while self.exit is None and not check():
                time.sleep(every)

        self._checks.append(check)
        threading.Thread(target=watch, name=f"torchcode-{what}-{self.pid}", daemon=True).start()

    def over_now(self) -> bool:
        """Look once more now, between two polls (a reply just came: what the worker holds at this moment counts,
        however soon it is ended); True when a limit is passed (the worker is then killed)."""
        if self.exit is None:
            for check in list(self._checks):
                check()
        return bool(self.scratch_over or self.memory_over)

    def finish(self, grace: float = 1.0) -> ExitInfo:
        """Ask it to leave, wait up to ``grace`` s, kill its whole group, return how it ended."""
        if self.exit is None:
            try:
                self.sock.settimeout(0.5)
                protocol.Message().send(self.sock, {"op": "bye"})
            except OSError:
                pass
            self.sock.close()
            self.exit = self.zygote.reap(self.pid, grace)
        return self.exit

"""The caller's side of a warm grading session (see ``torchcode.session``)."""

from __future__ import annotations

import atexit
import dataclasses
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from pathlib import Path
from typing import Callable

from torchcode.errors import GraderError, TorchcodeError, Unreadable, UsageError
from torchcode.grader.limits import Limits
from torchcode.grader.result import Report
from torchcode.grader.tree import SCRATCH

START_LIMIT = 120.0  # seconds for the session's process to import torch and get ready
SLACK = 60.0  # beyond a check's own limits, before a silent session counts as hung
DRY_RUN_SLACK = 60.0  # a GPU dry run (gpu_dry_run): its first one loads the meta-device kernels

_live: "weakref.WeakSet[Session]" = weakref.WeakSet()


class Cancelled(TorchcodeError):
    """The grade was cancelled (``Session.cancel``); nothing was decided."""


class Session:
    """One warm grading process. ``grade`` is thread-safe: concurrent callers take turns.

    ``limits`` are a check's (``torchcode.grader.limits.Limits``); ``device`` overrides theirs
    ("cpu", "cuda" or "auto", resolved once the process is up: see ``device``)."""

    def __init__(self, *, problems_dirs: list[Path] | None = None, limits: Limits | None = None,
                 device: str | None = None):
        self.limits = dataclasses.replace(limits) if limits else Limits()
        if device:
            self.limits.device = device
        self.problems_dirs = [str(Path(p).resolve()) for p in problems_dirs or []]
        self.device: str | None = None
        self._proc: subprocess.Popen | None = None
        self._sources: str | None = None
        self._log = None
        self._sock: socket.socket | None = None
        self._buf = b""
        self._lock = threading.Lock()
        self._busy = False
        self._aborted = False
        _live.add(self)

    # -- life cycle ---------------------------------------------------------------------------------
    def __enter__(self) -> "Session":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def start(self) -> "Session":
        """Start the session's process (if it is not running) and wait until it is ready."""
        with self._lock:
            self._ensure()
        return self

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def close(self) -> None:
        """Stop the session's process; its zygote and any worker go with it. Safe to call twice."""
        proc, self._proc = self._proc, None
        if proc is None:
            sources, self._sources = self._sources, None
            if sources:  # made for a process that never started
                shutil.rmtree(sources, ignore_errors=True)
            return
        try:
            self._sock.shutdown(socket.SHUT_WR)  # end of input: it closes its zygote and exits
        except (OSError, AttributeError):
            pass
        for sig, wait in ((None, 3.0), (signal.SIGTERM, 3.0), (signal.SIGKILL, 5.0)):
            if sig is not None:
                try:
                    proc.send_signal(sig)
                except ProcessLookupError:
                    pass
            try:
                proc.wait(wait)
                break
            except subprocess.TimeoutExpired:
                continue
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self._log is not None:
            self._log.close()
            self._log = None
        sources, self._sources = self._sources, None
        if sources and Path(sources).name.startswith(SCRATCH):
            shutil.rmtree(sources, ignore_errors=True)  # left behind when the process was killed

    def abort(self) -> None:
        """From another thread: end the session's process now, also while ``start`` waits for it to be ready
        (``start`` then raises GraderError at once; the process ends its zygote on the way). ``close`` tidies up."""
        self._aborted = True  # a process not spawned yet is ended as soon as it is (_ensure)
        proc = self._proc
        if proc is not None and proc.poll() is None:
            try:
                proc.send_signal(signal.SIGTERM)
            except ProcessLookupError:
                pass

    def cancel(self) -> None:
        """Stop the grade in flight (from another thread); its ``grade`` raises ``Cancelled``."""
        proc = self._proc
        if self._busy and proc is not None and proc.poll() is None:
            try:
                proc.send_signal(signal.SIGINT)
            except ProcessLookupError:
                pass

    # -- work ---------------------------------------------------------------------------------------
    def warm(self, problems: list[str]) -> None:
        """Build the reference side of these problems now, so their first grade does not pay for it."""
        self._request({"op": "warm", "problems": list(problems)}, None, START_LIMIT)

    def grade(self, problem: str, path: Path | str | None = None, *, source: str | None = None,
              seed: int | None = None, dtypes: list[str] | None = None,
              on_event: Callable[[dict], None] | None = None, gpu_dry_run: bool = False,
              imports_from: list[str] | None = None, packs: list[Path] | None = None) -> Report:
        """Grade ``path`` (a file) or ``source`` (text) as a submission to ``problem``.

        ``imports_from``: for this grade, the folders the submission imports its own modules from besides
        its file's (``Limits.imports_from``; a notebook passes the kernel's current folder at each grade).

        ``packs``: problem packs to find ``problem`` in besides the session's own (those a folder remembers).

        ``gpu_dry_run``: as ``check --gpu-dry-run``: on the CPU, code accepted also runs its cases on the
        meta device, and what would fail on a GPU goes into ``report.advice`` (never the verdict).

        Raises UsageError (unknown problem, no such file), GraderError (the grading process or a
        worker failed for a reason that is not the submission's: never a verdict), Cancelled."""
        if (path is None) == (source is None):
            raise UsageError("grade a file or a text: give one of path and source")
        req = {"op": "grade", "problem": problem, "seed": seed, "dtypes": dtypes, "source": source,
               "path": str(Path(path).resolve()) if path is not None else None, "gpu_dry_run": bool(gpu_dry_run)}
        if imports_from is not None:
            req["imports_from"] = [str(Path(f).resolve()) for f in imports_from]
        if packs:
            req["packs"] = [str(Path(p).resolve()) for p in packs]
        if path is not None and not Path(req["path"]).is_file():
            raise UsageError(f"no such file: {path}")
        if path is not None:
            Unreadable.check(req["path"], str(path))  # serve and watch: the worker would not read it either
        limit = self.limits.total_limit + 2 * self.limits.load_limit + SLACK + (DRY_RUN_SLACK if gpu_dry_run else 0)
        return Report.from_dict(self._request(req, on_event, limit)["report"])

    def bench(self, problem: str, path: Path | str, *, dtype: str = "float32", sizes: list[int] | None = None,
              reps: int = 5) -> dict:
        """Time an (accepted) kernel against the reference, as ``torchcode bench`` does: a
        ``BenchReport.to_dict()``. Raises UsageError when the kernel fails or the problem has no
        benchmark, GraderError and Cancelled as ``grade`` does."""
        req = {"op": "bench", "problem": problem, "path": str(Path(path).resolve()), "source": None,
               "dtype": dtype, "sizes": sizes, "reps": reps}
        return self._request(req, None, 600.0 + SLACK)["bench"]

    def _request(self, req: dict, on_event, limit: float) -> dict:
        with self._lock:
            self._ensure()
            self._busy = True
            try:
                self._send(req)
                deadline = time.monotonic() + limit
                while True:
                    msg = self._receive(deadline)
                    if "event" in msg:
                        if on_event is not None:
                            on_event(msg["event"])
                        continue
                    if "error" in msg:
                        raise _error(msg["error"])
                    return msg
            except (GraderError, BaseException) as e:
                if not isinstance(e, (UsageError, Cancelled)):
                    self.close()  # its state is unknown: the next request starts a new one
                raise
            finally:
                self._busy = False

    # -- the process --------------------------------------------------------------------------------
    def _ensure(self) -> None:
        if self.running:
            return
        self.close()
        self._log = tempfile.TemporaryFile(prefix="torchcode-session-")
        self._buf = b""
        # its temporary folder is made here, so that close() removes it however the process ended (killed while
        # its zygote started, before it could say where its folder was)
        self._sources = tempfile.mkdtemp(prefix=SCRATCH)
        # Requests and replies travel on a socket, not on pipes: a pipe of another process can be opened
        # again through /proc/PID/fd (by a worker that Landlock does not confine), a socket cannot.
        ours, theirs = socket.socketpair()
        try:
            # -P: the current folder (a learner's, holding their helper modules) is not put on the server's sys.path,
            # where a helper named like a module it imports (json.py) would run in this unconfined process
            self._proc = subprocess.Popen([sys.executable, "-P", "-m", "torchcode.session.server", str(theirs.fileno())],
                                          stdin=subprocess.DEVNULL, stdout=self._log, stderr=self._log,
                                          pass_fds=[theirs.fileno()], start_new_session=True)
        except OSError as e:
            ours.close()
            self.close()
            raise GraderError(f"cannot start the grading session's process ({e})") from None
        finally:
            theirs.close()
        self._sock = ours
        if self._aborted:
            self.abort()
        config = {"limits": dataclasses.asdict(self.limits), "problems_dirs": self.problems_dirs,
                  "parent": os.getpid(), "tmp": self._sources}
        self._send(config)
        msg = self._receive(time.monotonic() + START_LIMIT)
        if "error" in msg:
            self.close()
            raise _error(msg["error"])
        self.device = msg.get("device")

    def _send(self, obj: dict) -> None:
        try:
            self._sock.sendall(json.dumps(obj).encode() + b"\n")
        except (OSError, ValueError, AttributeError):
            raise self._died() from None

    def _receive(self, deadline: float) -> dict:
        fd = self._sock.fileno()
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                self.close()
                raise GraderError("the grading session stopped answering (it was restarted; try again)")
            ready, _, _ = select.select([fd], [], [], min(left, 1.0))
            if ready:
                try:
                    chunk = self._sock.recv(1 << 16)
                except OSError:
                    chunk = b""
                if not chunk:
                    raise self._died()
                self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        try:
            return json.loads(line)
        except ValueError:
            raise GraderError(f"the grading session sent something unreadable: {line[:200]!r}") from None

    def _died(self) -> GraderError:
        proc = self._proc
        try:
            code = proc.wait(5) if proc is not None else None
        except subprocess.TimeoutExpired:
            code = None
        tail = ""
        if self._log is not None:
            self._log.seek(0)
            tail = self._log.read()[-2000:].decode("utf-8", "replace").strip()
        self.close()
        why = f"the grading session's process ended (exit {code})" + (f":\n{tail}" if tail else "")
        return GraderError(why)


def _error(err: dict) -> TorchcodeError:
    kind, message = err.get("kind"), str(err.get("message") or "")
    if kind == "usage":
        return UsageError(message)
    if kind == "cancelled":
        return Cancelled(message)
    if kind == "internal":
        return GraderError(f"internal error in the grading session ({message}); please report it:\n"
                           + str(err.get("traceback") or ""))
    return GraderError(message)


@atexit.register
def _close_all() -> None:
    for session in list(_live):
        session.close()

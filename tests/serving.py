"""A real `torchcode serve` subprocess for the tests, and plain-HTTP requests to it with exact headers."""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Served:
    proc: subprocess.Popen
    url: str  # the one printed, with ?token=
    port: int
    token: str
    folder: Path
    home: Path
    output: list[str] = field(default_factory=list)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def request(self, method: str, path: str, *, headers: dict | None = None, body=None, auth: bool = True,
                raw: bytes | None = None):
        """One request with exactly these headers (``Host`` defaults to 127.0.0.1:PORT).
        ``auth`` adds the token as a bearer header; ``raw`` is a body sent as it is, in place of ``body`` as
        JSON. Returns (status, headers, parsed body)."""
        h = {"Host": f"127.0.0.1:{self.port}"}
        if auth:
            h["Authorization"] = f"Bearer {self.token}"
        if method not in ("GET", "HEAD") and auth:
            h["X-Torchcode"] = "1"
        h.update(headers or {})
        h = {k: v for k, v in h.items() if v is not None}
        data = raw if raw is not None else json.dumps(body).encode() if body is not None else None
        if data is not None:
            h["Content-Type"] = "application/json"
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=300)
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        for k, v in h.items():
            conn.putheader(k, v)
        if data is not None:
            conn.putheader("Content-Length", str(len(data)))
        conn.endheaders(data)
        r = conn.getresponse()
        raw = r.read()
        conn.close()
        ctype = r.getheader("content-type", "")
        parsed = raw.decode("utf-8", "replace")
        if "ndjson" in ctype:
            parsed = [json.loads(line) for line in parsed.splitlines() if line.strip()]
        elif "json" in ctype and raw:
            parsed = json.loads(raw)
        return r.status, {k.lower(): v for k, v in r.getheaders()}, parsed


def start_server(folder: Path, home: Path, *extra: str, timeout: float = 60, env: dict | None = None,
                 browser: bool = False) -> Served:
    exe = shutil.which("torchcode")
    cmd = [exe] if exe else [sys.executable, "-m", "torchcode"]
    env = {**os.environ, "TORCHCODE_HOME": str(home), "NO_COLOR": "1", "PYTHONUNBUFFERED": "1", **(env or {})}
    env.pop("TORCHCODE_PROBLEMS", None)
    flags = [] if browser else ["--no-browser"]
    proc = subprocess.Popen([*cmd, "serve", str(folder), *flags, "--port", "0", *extra], cwd=folder, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        m = re.search(r"(http://127\.0\.0\.1:(\d+)/\?token=(\S+))", line)
        if m:
            served = Served(proc, m.group(1), int(m.group(2)), m.group(3), folder, home, lines)
            threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True).start()  # never a full pipe
            _wait_listening(served, deadline)
            return served
    proc.kill()
    raise RuntimeError("torchcode serve did not print its URL:\n" + "".join(lines) + (proc.stdout.read() or ""))


def _wait_listening(served: Served, deadline: float) -> None:
    while time.monotonic() < deadline:
        try:
            served.request("GET", "/api/problems")
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("torchcode serve printed its URL but does not answer")


def stop_server(served: Served, timeout: float = 30) -> int:
    """Ctrl-C, as a learner stops it; returns the exit code."""
    if served.proc.poll() is None:
        served.proc.send_signal(signal.SIGINT)
        try:
            served.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(served.proc.pid, signal.SIGKILL)
            served.proc.wait()
            raise AssertionError("torchcode serve did not stop on Ctrl-C") from None
    return served.proc.returncode

"""`torchcode serve`: the browser workspace on 127.0.0.1, behind a one-time token."""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import os
import secrets
import shutil
import socket
import sys
from pathlib import Path

from torchcode.commands.common import display_path
from torchcode.errors import UsageError

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


DEFAULT_PORT = 8765


def run(directory: Path | None, port: int | None, no_browser: bool, host: str, allow_remote: bool,
        problems_dirs: list[Path] | None, device: str = "auto", gpu_dry_run: bool = False) -> int:
    try:
        import uvicorn

        from torchcode.web.app import create_app
    except ImportError as e:
        raise UsageError(f"`torchcode serve` needs Starlette and uvicorn, which come with torchcode, but {e.name} is "
                         "missing here: pip install 'torchcode[serve]' (from a checkout of torchcode: "
                         "pip install '.[serve]')") from None
    from torchcode.web.security import Guard
    from torchcode.web.workspace import Workspace

    if device not in ("auto", "cpu", "cuda"):
        raise UsageError(f"--device must be auto, cpu or cuda, not {device!r}")
    folder = (directory or Path.cwd()).resolve()
    if folder.is_file():
        raise UsageError(f"{directory} is a file: serve takes the folder that holds your PROBLEM.py files "
                         f"(`torchcode serve {display_path(folder.parent)}`)")
    if not folder.is_dir():
        raise UsageError(f"no such folder: {folder}")
    loopback = _is_loopback(host)
    if not loopback and not allow_remote:
        raise UsageError(f"--host {host} would let other machines reach a server that runs code and edits files; "
                         "pass --allow-remote as well if that is really what you want")
    sock = _bind(host, port) if port is not None else _first_free(host)
    port = sock.getsockname()[1]
    hosts = {f"{h}:{port}" for h in LOOPBACK_NAMES} | _names(host, port)
    if port == 80:  # browsers leave the default port out of Host
        hosts |= {h.rsplit(":", 1)[0] for h in hosts}
    token = secrets.token_urlsafe(32)
    ws = Workspace(folder, problems_dirs, device=device, gpu_dry_run=gpu_dry_run)
    app = Guard(create_app(ws), token, hosts, port)
    shown = "127.0.0.1" if loopback or host in ("0.0.0.0", "::") else (f"[{host}]" if ":" in host else host)
    url = f"http://{shown}:{port}/?token={token}"
    if not loopback:
        print(f"WARNING: serving on {host}: anyone who can reach this address and has the token can run code "
              "and edit files in this folder as you.", file=sys.stderr, flush=True)
    print(f"torchcode serve: working in {folder}", flush=True)
    print(f"Open this URL in your browser (it carries your access token, keep it private):\n    {url}", flush=True)
    print("Ctrl-C stops the server.", flush=True)
    opener = None if no_browser else _open_browser(url)
    from torchcode.commands import interrupts

    interrupts.message = "torchcode serve stopped (checks in flight were cancelled, nothing left running)"
    # Ctrl-C: a check in flight is not waited for: it is cancelled at once, so its page is told and its
    # stream ends before the graceful-shutdown timeout (a stream still open then is cut by uvicorn)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on", ws="none",
                            timeout_graceful_shutdown=3)
    server = _server_class(uvicorn)(config, ws)
    _quiet_cut_streams()
    try:
        server.run(sockets=[sock])
    finally:
        if opener:
            shutil.rmtree(opener, ignore_errors=True)
    return 0


def _server_class(uvicorn):
    class Server(uvicorn.Server):
        """uvicorn's server, which first stops the work in flight when the learner presses Ctrl-C."""

        def __init__(self, config, ws):
            super().__init__(config)
            self.ws = ws

        def handle_exit(self, sig, frame):
            import threading

            # a signal handler: the cancels signal processes, in a thread of their own
            threading.Thread(target=self.ws.stop, daemon=True).start()
            super().handle_exit(sig, frame)

    return Server


class _CutStream(logging.Filter):
    """What Ctrl-C cuts short is no error of the learner's, and its traceback never reaches the terminal: a
    stream uvicorn had to cut at shutdown (the page was told, or is gone with the server), and Starlette's
    lifespan, cancelled when a second Ctrl-C ends the command before the lifespan has finished (Starlette
    reports that as a "shutdown failed" message holding the traceback's text)."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        text = record.msg if isinstance(record.msg, str) else ""
        cut = "timeout graceful shutdown exceeded" in text
        cancelled = text.startswith("Traceback") and text.rstrip().endswith(("CancelledError", "KeyboardInterrupt"))
        return not (cut or cancelled or isinstance(exc, (asyncio.CancelledError, KeyboardInterrupt)))


def _quiet_cut_streams() -> None:
    logging.getLogger("uvicorn.error").addFilter(_CutStream())


def _open_browser(url: str) -> str | None:
    """Open the browser on a private file that redirects to ``url``, as Jupyter does: a browser started
    with the URL itself would show the token to every local user in its command line (ps)."""
    import html
    import tempfile
    import webbrowser

    folder = tempfile.mkdtemp(prefix="torchcode-serve-")  # mode 0700: this user's only
    page = Path(folder) / "open.html"
    fd = os.open(page, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(f'<!doctype html><meta charset="utf-8"><meta http-equiv="refresh" content="0;url={html.escape(url)}">'
                f'<title>torchcode serve</title><p><a href="{html.escape(url)}">Open torchcode serve</a></p>\n')
    try:
        webbrowser.open(page.as_uri())
    except Exception:  # no browser here: the printed URL is enough
        pass
    return folder


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _first_free(host: str) -> socket.socket:
    for p in range(DEFAULT_PORT, DEFAULT_PORT + 20):
        try:
            return _bind(host, p)
        except UsageError:
            continue
    return _bind(host, 0)


def _bind(host: str, port: int) -> socket.socket:
    if not 0 <= port <= 65535:
        raise UsageError(f"--port must be from 0 to 65535 (0: any free port), not {port}")
    addr = "127.0.0.1" if host == "localhost" else host.strip("[]")
    family = socket.AF_INET6 if ":" in addr else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((addr, port))
    except OSError as e:
        sock.close()
        raise UsageError(f"cannot listen on {host}:{port}: {e.strerror}. Pick another port with --port "
                         "(0: any free one)") from None
    sock.listen(64)
    sock.set_inheritable(True)
    return sock


def _names(host: str, port: int) -> set[str]:
    """The Host headers this server answers to besides the loopback ones."""
    if _is_loopback(host):
        return set()
    names = {host if ":" not in host.strip("[]") else f"[{host.strip('[]')}]"}
    if host in ("0.0.0.0", "::"):
        names = {socket.gethostname(), socket.getfqdn()}
        try:
            names |= set(socket.gethostbyname_ex(socket.gethostname())[2])
        except OSError:
            pass
    return {f"{n}:{port}" for n in names}

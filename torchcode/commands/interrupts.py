"""Ctrl-C: one outcome wherever it lands.

The CLI installs ``handler`` for SIGINT. The first Ctrl-C raises ``KeyboardInterrupt`` (so a
blocking wait stops at once) and is remembered; later ones are only remembered, so the
clean-up the first one set off (killing the worker, closing the zygote, removing temporary
files) runs to its end. Inside ``deferred()`` a Ctrl-C is remembered and raised when the
section ends (or at ``check()``): a section that must not be cut in half runs there.
``settle()`` marks the point after which the command's outcome is decided (``check`` has
recorded its attempt): a later Ctrl-C changes nothing.

The CLI boundary then prints ``message`` and exits 130 whenever a Ctrl-C was requested
before the outcome was settled, however the exception travelled (typer turns it into a
bare exit code).
"""

from __future__ import annotations

import contextlib
import signal
import threading

message = "interrupted"

_requested = False  # a Ctrl-C arrived
_raised = False     # KeyboardInterrupt has been raised for it (at most once)
_settled = False    # the outcome is decided; Ctrl-C no longer matters
_deferring = 0


def handler(signum, frame) -> None:
    global _requested
    if _settled:
        return
    _requested = True
    if not _deferring:
        _raise_once()


def _raise_once() -> None:
    global _raised
    if not _raised:
        _raised = True
        raise KeyboardInterrupt


def install() -> None:
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, handler)


def requested() -> bool:
    return _requested and not _settled


def check() -> None:
    """Raise ``KeyboardInterrupt`` now if a Ctrl-C arrived and the outcome is not settled yet."""
    if requested():
        global _raised
        _raised = True
        raise KeyboardInterrupt


@contextlib.contextmanager
def deferred():
    """Run a section whole: a Ctrl-C inside it is raised when it ends (unless settled by then)."""
    global _deferring
    installed = threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) is not handler
    previous = signal.signal(signal.SIGINT, handler) if installed else None
    _deferring += 1
    try:
        yield
    finally:
        _deferring -= 1
        if installed:
            signal.signal(signal.SIGINT, previous)
    if requested() and not _deferring:
        _raise_once()


def settle() -> bool:
    """The outcome is decided from here on; return whether a Ctrl-C came first (and was not yet settled).

    SIGINT is then ignored outright: Python's shutdown would otherwise restore the default
    action, and a late Ctrl-C would kill a finished command (exit -2, after its report).
    """
    global _settled
    before = requested()
    _settled = True
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) is handler:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    return before

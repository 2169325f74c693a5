"""One line on the terminal that says what a check is doing while it runs (`check` on a TTY only).

It appears once the check has run for ``delay`` seconds, names the case running and counts the
seconds (an endless loop shows a clock running towards the case's time limit, not a blank screen),
and is erased before the report is printed. It is drawn on stderr, and only when both stdout and
stderr are terminals: never into a pipe, a file or ``--json`` output.

A process that forks must not have threads that may hold a lock: the ticking thread is stopped
(``pause()``, joined) before the grader forks its zygote, and started again after it.
"""

from __future__ import annotations

import shutil
import sys
import threading
import time

CLEAR = "\r\x1b[2K"


def wanted(as_json: bool) -> bool:
    return not as_json and sys.stdout.isatty() and sys.stderr.isatty()


class ProgressLine:
    def __init__(self, label: str, *, enabled: bool, delay: float = 0.5, limit: float | None = None):
        self.enabled = enabled
        self.label = label
        self.delay = delay
        self.limit = limit  # seconds per case, shown while a case runs
        self.t0 = time.monotonic()
        self.doing = "starting the grader (importing torch)"
        self.in_case = False  # a case runs: its time limit is shown
        self.since = self.t0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._shown = False

    def start(self) -> None:
        if self.enabled and self._thread is None:
            self._stop = threading.Event()
            self._thread = threading.Thread(target=self._tick, args=(self._stop,), name="torchcode-progress",
                                            daemon=True)
            self._thread.start()

    def pause(self) -> None:
        """Stop the ticking thread (the line stays): no thread runs while this process forks."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def event(self, ev: dict) -> None:
        """An ``on_event`` callback for ``Grader.grade``."""
        kind = ev.get("event")
        with self._lock:
            if kind == "started":
                self.doing, self.in_case = "importing your file", False
            elif kind == "case":
                # the passing cases run a second time, with new values: a count of its own, said as such
                what = "again with new values, case" if ev.get("replay") else "case"
                dtype = f", {ev['dtype']}" if ev.get("dtype") else ""
                self.doing = f"{what} {ev.get('index', 0) + 1}/{ev.get('total', '?')}: {ev.get('name', '')}{dtype}"
                self.in_case = True
            else:
                return
            self.since = time.monotonic()

    def _tick(self, stop: threading.Event) -> None:
        while not stop.wait(0.1):
            if time.monotonic() - self.t0 >= self.delay:
                self._draw()

    def _draw(self) -> None:
        with self._lock:
            running = time.monotonic() - self.since
            limit = ""
            if self.limit and self.in_case:
                limit = (f" (limit {self.limit:g}s)" if running <= self.limit
                         else f" (limit {self.limit:g}s; a case's first run may take {2 * self.limit:g}s)")
            text = f"checking {self.label}: {self.doing}  {running:.1f}s{limit}"
        width = shutil.get_terminal_size((80, 24)).columns
        self._write(CLEAR + text[: max(width - 1, 10)])
        self._shown = True

    def _write(self, text: str) -> None:
        try:
            sys.stderr.write(text)
            sys.stderr.flush()
        except (OSError, ValueError):
            pass

    def stop(self) -> None:
        """Stop ticking and erase the line (also on Ctrl-C and errors)."""
        self.pause()
        if self._shown:
            self._write(CLEAR)
            self._shown = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

"""What the browser workspace shows and does, on the same files and progress store as the CLI.

No web framework here: plain dicts in, plain dicts out. The learner's file for a problem is the
one ``torchcode start`` records for the served directory (else ``DIR/<id>.py``), so the terminal,
the learner's own editor and the browser all work on one file. Grading goes through one warm
:class:`torchcode.session.Session` (a separate process: this one never imports torch).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Callable

from torchcode.catalog import with_remembered
from torchcode.errors import GraderError, StoreError, UsageError
from torchcode.paths import pack_to_record
from torchcode.progress import ProblemProgress, Store
from torchcode.session import Cancelled

MAX_FILE_BYTES = 1_000_000  # what the editor may save: a kernel is a few KB
NEWLINE = b"\n"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class Workspace:
    def __init__(self, directory: Path, problems_dirs: list[Path] | None = None, device: str = "auto",
                 gpu_dry_run: bool = False):
        self.dir = Path(directory).resolve()
        self.gpu_dry_run = gpu_dry_run  # the page's "GPU dry run" box starts ticked
        self.device = device
        # the packs named, and those this folder remembers for the problems started in it (`start --problems-dir`)
        self.catalog = with_remembered(problems_dirs, self._read(lambda st: [
            Path(p) for p in dict.fromkeys(st.started_packs(self.dir).values())], []))
        self.problems_dirs = [*(problems_dirs or []), *self.catalog.remembered] or None
        self._session = None
        self._session_lock = threading.Lock()
        self._bench: subprocess.Popen | None = None
        self._closed = False
        self._stopping = False
        self._starting = None  # the session being started (stop() ends it rather than wait)
        self._bench_lock = threading.Lock()

    # -- the store: one connection per call (requests run on several threads) --------------------
    def _read(self, read: Callable[[Store], object], default):
        st = Store()
        try:
            return read(st)
        except StoreError:
            return default
        finally:
            st.close()

    def _write(self, write: Callable[[Store], object]) -> tuple[object, str | None]:
        """(result, None) or (None, why it was not saved)."""
        st = Store()
        try:
            return write(st), None
        except StoreError as e:
            return None, str(e)
        finally:
            st.close()

    # -- the list ---------------------------------------------------------------------------------
    def listing(self) -> dict:
        problems = self.catalog.ordered()
        progress: dict[str, ProblemProgress] = self._read(lambda st: st.progress(), {})
        rows = []
        for p in problems:
            pr = progress.get(p.id, ProblemProgress(p.id))
            rows.append({"id": p.id, "title": p.title, "difficulty": p.difficulty, "topic": p.topic,
                         "tags": list(p.tags), "status": pr.status, "attempts": pr.attempts,
                         "best_ms": round(pr.best_seconds * 1000, 2) if pr.best_seconds is not None else None})
        suggestion = next((r for r in rows if r["status"] != "solved"), None)
        return {"problems": rows, "solved": sum(r["status"] == "solved" for r in rows),
                "suggestion": suggestion["id"] if suggestion else None,
                "broken": {k: str(v) for k, v in sorted(self.catalog.broken.items())}}

    # -- one problem ------------------------------------------------------------------------------
    def spec(self, pid: str):
        return self.catalog.get(pid)  # ProblemNotFound (a UsageError-like TorchcodeError) if unknown

    def path(self, spec) -> Path:
        recorded = self._read(lambda st: st.started_file(self.dir, spec.id), None)
        return Path(recorded) if recorded else self.dir / f"{spec.id}.py"

    def display(self, path: Path) -> str:
        try:
            rel = path.relative_to(self.dir)
            return str(rel)
        except ValueError:
            return str(path)

    def problem(self, pid: str) -> dict:
        from torchcode.web.markup import statement_html

        from torchcode.scaffold import entry_signature

        spec = self.spec(pid)
        revealed = self._read(lambda st: st.hints_revealed(spec.id), 0)
        return {"id": spec.id, "title": spec.title, "difficulty": spec.difficulty, "topic": spec.topic,
                "tags": list(spec.tags), "signature": entry_signature(spec), "forbidden": list(spec.forbidden),
                "statement_html": statement_html(spec.statement()),
                "hints": self._hints(spec, revealed), "hints_total": len(spec.hints),
                "solved": self._read(lambda st: st.is_solved(spec.id), False),
                "has_bench": any(spec.bench_sizes.values()), "gpu_dry_run": self.gpu_dry_run,
                "file": self.file(pid), "attempts": self.attempts(pid)}

    def _hints(self, spec, revealed: int) -> list[str]:
        from torchcode.web.markup import statement_html

        return [statement_html(h) for h in spec.hints[:revealed]]

    def file(self, pid: str) -> dict:
        spec = self.spec(pid)
        path = self.path(spec)
        if path.is_dir():
            raise UsageError(self._a_folder(spec, path))
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return {"exists": False, "path": self.display(path), "text": "", "sha": ""}
        except OSError as e:
            raise UsageError(f"cannot read {self.display(path)}: {e.strerror}") from None
        return {"exists": True, "path": self.display(path), "sha": sha256(data), **_as_text(data, self.display(path))}

    def _a_folder(self, spec, path: Path) -> str:
        return (f"{self.display(path)} is a folder, not a file: {spec.id} is graded from a file of that name. Move or "
                f"rename the folder, then press Start (or run `torchcode start {spec.id}`)")

    def _unchanged(self, pid: str, base_sha: str | None):
        """(spec, path, file) of a started problem whose file is still the one the page loaded (``base_sha``)."""
        spec = self.spec(pid)
        path = self.path(spec)
        current = self.file(pid)
        if not current["exists"]:
            raise UsageError(f"{spec.id} is not started here: press Start (or run `torchcode start {spec.id}`)")
        if base_sha is not None and current["sha"] != base_sha:
            raise Conflict(current)
        return spec, path, current

    def save(self, pid: str, text: str, base_sha: str | None) -> dict:
        """Write the editor's text; refuse (``Conflict``) when the file changed on disk since ``base_sha``."""
        spec, path, current = self._unchanged(pid, base_sha)
        if not current["editable"]:  # its bytes are not the text shown: saving that text would lose them
            raise UsageError(current["note"])
        data = _encoded(text, current["encoding"], self.display(path))
        if len(data) > MAX_FILE_BYTES:
            raise UsageError(f"the file is over {MAX_FILE_BYTES // 1000} KB; a kernel fits in a few KB")
        if current["sha"] == sha256(data):
            return current
        tmp = path.with_name(f".{path.name}.torchcode-save")
        try:
            tmp.write_bytes(data)
            os.replace(tmp, path)
        except OSError as e:
            tmp.unlink(missing_ok=True)
            raise UsageError(f"cannot save {self.display(path)}: {e.strerror}") from None
        return {"exists": True, "path": self.display(path), "sha": sha256(data), **_as_text(data, self.display(path))}

    def convert(self, pid: str, base_sha: str | None) -> dict:
        """A file that is not UTF-8 (and declares no encoding Python reads), rewritten as UTF-8 from the text
        shown for it; the original is kept beside it as a backup, as `reset` keeps one."""
        from torchcode.scaffold import write_stub

        spec, path, current = self._unchanged(pid, base_sha)
        if current["editable"]:
            return {"file": current, "backup": None}
        written = write_stub(spec, path, force=True, text=_utf8_coding_line(current["text"]))
        return {"file": self.file(pid), "backup": self.display(written.backup) if written.backup else None}

    def start(self, pid: str) -> dict:
        """As `torchcode start` in the served folder: the stub, remembered as this folder's file."""
        from torchcode.scaffold import write_stub

        spec = self.spec(pid)
        path = self.path(spec)
        if not path.exists():
            write_stub(spec, path)
        _, unsaved = self._write(lambda st: st.mark_started(self.dir, spec.id, path, pack_to_record(spec.pack)))
        return {"file": self.file(pid), "warning": unsaved}

    def reset(self, pid: str) -> dict:
        """As `torchcode reset`: the stub again, the current file kept as a backup beside it."""
        from torchcode.scaffold import write_stub

        spec = self.spec(pid)
        path = self.path(spec)
        written = write_stub(spec, path, force=True)
        _, unsaved = self._write(lambda st: st.mark_started(self.dir, spec.id, path, pack_to_record(spec.pack)))
        return {"file": self.file(pid), "backup": self.display(written.backup) if written.backup else None,
                "warning": unsaved}

    def hint(self, pid: str) -> dict:
        """As `torchcode hint`: one more hint, recorded as revealed."""
        spec = self.spec(pid)
        n, unsaved = self._write(lambda st: st.reveal_hint(spec.id, len(spec.hints)))
        if n is None:
            n = min(self._read(lambda st: st.hints_revealed(spec.id), 0) + 1, len(spec.hints))
        return {"hints": self._hints(spec, n), "hints_total": len(spec.hints),
                "warning": f"hint {n} is shown but could not be recorded as revealed: {unsaved}" if unsaved else None}

    def solution(self, pid: str, confirmed: bool) -> dict:
        """As `torchcode solution`: the reference, after a confirmation unless the problem is solved."""
        from torchcode.scaffold import solution_source

        spec = self.spec(pid)
        if not confirmed and not self._read(lambda st: st.is_solved(spec.id), False):
            return {"gated": True, "message": f"You have not solved {spec.id} yet. Show the reference solution anyway?"}
        return {"gated": False, "source": solution_source(spec)}

    def attempts(self, pid: str) -> list[dict]:
        spec = self.spec(pid)
        rows = self._read(lambda st: st.attempts(spec.id), [])
        return [{k: r[k] for k in ("at", "verdict", "passed", "total", "seconds", "kernel_seconds", "seed")}
                for r in reversed(rows)]

    # -- grading ----------------------------------------------------------------------------------
    def session(self):
        """The warm grading session, started on first use (the server starts it ahead, in a thread)."""
        with self._session_lock:
            if self._session is None:
                from torchcode.session import Session

                s = self._starting = Session(problems_dirs=self.problems_dirs, device=self.device)
                try:
                    if self._stopping:  # read after _starting is set, as stop() reads _starting after _stopping
                        raise Cancelled("the server is stopping")
                    s.start()
                except GraderError:
                    s.close()
                    if self._stopping:  # Ctrl-C ended it while it started (stop)
                        raise Cancelled("the server is stopping") from None
                    raise
                finally:
                    self._starting = None
                self._session = s
            return self._session

    def stop(self) -> None:
        """The server is stopping (Ctrl-C): the work in flight ends now, and no new grade starts."""
        self._stopping = True
        starting = self._starting
        if starting is not None:  # not waited for: its start takes seconds (torch's import, the zygote)
            starting.abort()
        self.cancel()
        self.cancel_bench()

    def cancel(self) -> None:
        s = self._session
        if s is not None:
            s.cancel()

    def close(self) -> None:
        with self._bench_lock:
            self._closed = True
            self.cancel_bench()
        with self._session_lock:
            if self._session is not None:
                self._session.close()
                self._session = None

    def check(self, pid: str, on_event: Callable[[dict], None], gpu_dry_run: bool = False) -> dict:
        """Grade the learner's file as `torchcode check` does, record the attempt, render the report
        (``gpu_dry_run``: as `check --gpu-dry-run`)."""
        from torchcode.progress.record import record_report

        spec = self.spec(pid)
        path = self.path(spec)
        if path.is_dir():
            raise UsageError(self._a_folder(spec, path))
        if not path.is_file():
            raise UsageError(f"{spec.id} is not started here: press Start (or run `torchcode start {spec.id}`)")
        session = self.session()
        if self._stopping:  # Ctrl-C came while the session started: grade nothing
            raise Cancelled("the server is stopping")
        report = session.grade(spec.id, path=str(path), on_event=on_event, gpu_dry_run=gpu_dry_run)
        st = Store()
        try:
            record_report(st, report, path)
            warning = "; ".join(st.warnings) or None
        except StoreError as e:
            warning = f"progress not saved: {e}"
        finally:
            st.close()
        nxt = self.listing()["suggestion"] if report.passed else None
        return {"report": report.to_dict(), "html": report_html(report, self.display(path)), "warning": warning,
                "next": nxt if nxt != spec.id else None}


    def bench(self, pid: str) -> dict:
        """`torchcode bench` on the learner's file, in its own process (it imports torch; this one must
        not): time and peak memory against sequence length, theirs vs the reference vs the fused kernel."""
        spec = self.spec(pid)
        path = self.path(spec)
        if not path.is_file():
            raise UsageError(f"{spec.id} is not started here: press Start (or run `torchcode start {spec.id}`)")
        # -P: the workspace folder (run in) is not put on its sys.path: a helper there named like a module the
        # command imports (json.py) would run unconfined
        cmd = [sys.executable, "-P", "-m", "torchcode", "bench", spec.id, str(path), "--json", "--device", self.device]
        for d in self.problems_dirs or []:
            cmd += ["--problems-dir", str(d)]
        with self._bench_lock:
            if self._closed:
                raise UsageError("the server is stopping")
            self._bench = subprocess.Popen(cmd, cwd=self.dir, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                           stderr=subprocess.PIPE, text=True, start_new_session=True)
        proc = self._bench
        try:
            out, err = proc.communicate()
        finally:
            self._bench = None
        if proc.returncode == 0:
            try:
                return {"bench": json.loads(out)}
            except ValueError:
                pass
        if proc.returncode < 0:
            raise Cancelled("the benchmark was stopped")
        lines = [ln.removeprefix("error: ") for ln in err.strip().splitlines() if ln.strip()]
        raise UsageError("\n".join(lines[-5:]) or f"the benchmark could not run (exit code {proc.returncode})")

    def cancel_bench(self) -> None:
        proc = self._bench
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _as_text(data: bytes, shown: str) -> dict:
    """The editor's view of a file's bytes, read as Python reads a source file (UTF-8, a UTF-8 byte-order
    mark, or the encoding a coding line declares): {text, encoding, editable, note}. ``encoding`` is what a
    save writes back (a BOM and a declared encoding are kept, so nothing but the edit changes). A file Python
    cannot read as it is (UTF-16, Latin-1 bytes without a coding line) is shown as best it can be read,
    not editable: saving that text would silently replace the learner's bytes."""
    import codecs
    import tokenize

    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        text = data.decode(encoding)
    except (SyntaxError, LookupError, UnicodeDecodeError):
        if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
            what, text = "UTF-16 text (as Windows PowerShell's `>` writes it)", data.decode("utf-16", "replace")
        else:
            try:
                data.decode("utf-8")
                at = None
            except UnicodeDecodeError as u:
                at = u.start
            where = f" (byte 0x{data[at]:02x} on line {data.count(NEWLINE, 0, at) + 1})" if at is not None else ""
            unknown = _declared(data.decode("latin-1"))
            if unknown is not None and at is None:  # UTF-8, but its coding line names what Python cannot read
                text = data.decode("utf-8")
                what = (f"UTF-8 text whose coding line names {unknown!r}, an encoding Python does not know "
                        f"(Convert to UTF-8 also makes that line say utf-8)")
            else:
                try:
                    text, guess = data.decode("cp1252"), "Windows-1252"
                except UnicodeDecodeError:
                    text, guess = data.decode("latin-1"), "Latin-1"
                what = f"not UTF-8 text{where}; it is shown here read as {guess}"
        note = (f"{shown} is {what}. Python reads only UTF-8 here (or the encoding a `# -*- coding: ... -*-` "
                f"line declares), so it cannot be checked as it is, and this editor will not overwrite it: "
                f"Convert to UTF-8 saves the text shown as UTF-8 (your file is kept as a backup beside it), "
                f"or save it as UTF-8 in your own editor.")
        return {"text": text.removeprefix("\ufeff"), "encoding": None, "editable": False, "note": note}
    if text.startswith("\ufeff"):
        text = text[1:]  # the BOM is not the learner's text: it is written back on save
    note = None
    if codecs.lookup(encoding).name not in ("utf-8", "utf-8-sig"):
        name = _declared(text) or encoding  # as the learner wrote it: latin-1, not iso-8859-1
        note = (f"{shown} is in {name}, as its coding line declares: the editor saves it in {name}, "
                f"so characters {name} cannot hold are refused (change the coding line to utf-8 for them).")
    return {"text": text, "encoding": encoding, "editable": True, "note": note}


def _declared(text: str) -> str | None:
    """The encoding a text's coding line names (PEP 263: on line 1, or line 2 below a comment), as written."""
    import re

    for line in text.splitlines()[:2]:
        m = re.match(r"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)", line)
        if m:
            return m.group(1)
        if line.strip() and not line.lstrip().startswith("#"):
            return None
    return None


def _utf8_coding_line(text: str) -> str:
    """``text`` with its coding line, if it has one naming another encoding, saying utf-8 (what Convert writes):
    a line naming an encoding Python does not know, or one the bytes were not in, would still refuse it."""
    import re

    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines[:2]):
        m = re.match(r"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)", line)
        if m:
            lines[i] = line[:m.start(1)] + "utf-8" + line[m.end(1):]
            return "".join(lines)
        if line.strip() and not line.lstrip().startswith("#"):
            break
    return text


def _encoded(text: str, encoding: str, shown: str) -> bytes:
    """``text`` as the file's bytes: in the encoding its own coding line declares (the editor may have
    changed it), else the file's (a BOM kept)."""
    import codecs

    declared = _declared(text)
    if declared is not None:
        try:
            name = codecs.lookup(declared).name
        except LookupError:
            raise UsageError(f"the coding line names an encoding Python does not know ({declared!r}): "
                             "write `# -*- coding: utf-8 -*-` or remove the line") from None
        if name == "utf-8" and encoding == "utf-8-sig":
            name = "utf-8-sig"
        encoding = name
    try:
        return text.encode(encoding)
    except UnicodeEncodeError as e:
        if codecs.lookup(encoding).name in ("utf-8", "utf-8-sig"):  # a lone surrogate ("\\ud800" in JSON)
            raise UsageError(f"the text holds a character that cannot be saved (position {e.start}: "
                             f"{text[e.start:e.end]!a}); remove it") from None
        raise UsageError(f"{text[e.start:e.end]!a} (position {e.start}) cannot be saved in {encoding}, the encoding "
                         f"{shown} declares on its coding line: remove it, or change that line to "
                         "`# -*- coding: utf-8 -*-`") from None


class Conflict(Exception):
    """The file changed on disk since the page loaded it."""

    def __init__(self, current: dict):
        super().__init__("the file changed on disk")
        self.current = current


class _Utf8(io.StringIO):
    encoding = "utf-8"  # so the report draws the same marks as in a UTF-8 terminal


def report_html(report, display_file: str) -> str:
    """The CLI's report, exactly, as HTML (everything the submission controls is escaped)."""
    from rich.console import Console

    from torchcode.render.report import report as render

    con = Console(file=_Utf8(), record=True, width=100, force_terminal=True, color_system="truecolor",
                  highlight=False, soft_wrap=False)
    render(con, report, display_file=display_file)
    return con.export_html(inline_styles=True, code_format="{code}")

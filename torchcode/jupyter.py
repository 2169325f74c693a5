"""Jupyter: ``%load_ext torchcode`` adds the ``%torchcode`` magics to an IPython kernel.

    %%torchcode gqa [--seed N] [--dtype D] [--gpu-dry-run]   grade this cell's code (the cell is not run in the kernel)
    %torchcode hint [gqa] [--all]            reveal the next hint (default: the last graded cell's problem)
    %torchcode show [gqa]                    the statement, with its math
    %torchcode status                        your progress

Grading never runs in the kernel's process nor in a fork of it: a kernel that has run torch ops
cannot fork safely, and a hostile cell must not reach the kernel. The cell's text goes to a warm
grading session (``torchcode.session.Session``), a separate process started with exec on the first
grade and kept for the kernel's life. The kernel itself never imports torch for this. Attempts go
to the same progress store as the CLI's (``TORCHCODE_HOME``).
"""

from __future__ import annotations

import atexit
import io
import os
import shlex
import sys
import threading

_session = None
_session_lock = threading.Lock()
_last_problem: str | None = None  # the problem of the last graded cell: hint and show default to it

USAGE = ("usage: %%torchcode PROBLEM [--seed N] [--dtype D] [--gpu-dry-run] (a cell to grade), "
         "%torchcode hint [PROBLEM] [--all], %torchcode show [PROBLEM], %torchcode status")


def load(ipython) -> None:
    from IPython.core.magic import register_line_cell_magic  # noqa: F401  (fails early without IPython)

    ipython.register_magic_function(magic, magic_kind="line_cell", magic_name="torchcode")


def unload(ipython) -> None:
    close_session()


def close_session() -> None:
    global _session
    with _session_lock:
        s, _session = _session, None
    if s is not None:
        s.close()


def session():
    """The kernel's grading session, started on first use (a separate process; closed at exit)."""
    global _session
    with _session_lock:
        if _session is None:
            from torchcode.grader.limits import Limits
            from torchcode.session import Session

            s = Session(limits=Limits(imports_from=_here(), device=os.environ.get("TORCHCODE_DEVICE") or "auto"))
            # (a cell imports the notebook folder's modules; the device as `check` picks it)
            try:
                s.start()
            except BaseException:  # interrupted or failed while starting: leave no process behind
                s.close()
                raise
            _session = s
            atexit.register(close_session)
        return _session


def magic(line: str, cell: str | None = None):
    from torchcode.errors import TorchcodeError

    try:
        args = shlex.split(line)
    except ValueError as e:
        return _error(f"cannot read the magic's arguments ({e}). {USAGE}")
    try:
        if cell is not None:
            return _grade(args, cell)
        if not args:
            return _error(USAGE)
        command, rest = args[0], args[1:]
        show_all = "--all" in rest
        rest = [a for a in rest if a != "--all"] if command == "hint" else rest
        if command in ("hint", "show") and len(rest) <= 1:
            problem = rest[0] if rest else _default_problem(command)
            return _hint(problem, show_all) if command == "hint" else _show_statement(problem)
        if command == "status" and not rest:
            return _status()
        return _error(USAGE)
    except TorchcodeError as e:
        return _error(str(e))


def _default_problem(command: str) -> str:
    from torchcode.errors import UsageError

    if _last_problem is None:
        raise UsageError(f"which problem? `%torchcode {command} PROBLEM` (no cell has been graded yet in this kernel)")
    return _last_problem


def _error(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)


# -- grading ------------------------------------------------------------------------------------

def _grade_args(args: list[str]) -> tuple[str, int | None, list[str] | None, bool]:
    from torchcode.errors import UsageError
    from torchcode.progress import SEED_MAX, SEED_MIN

    if not args or args[0].startswith("-"):
        raise UsageError(f"name the problem this cell solves: %%torchcode PROBLEM. {USAGE}")
    problem, seed, dtypes = args[0], None, []
    dry = "--gpu-dry-run" in args[1:]  # as `check --gpu-dry-run`: advice on an accepted cell, on the CPU
    rest = iter([a for a in args[1:] if a != "--gpu-dry-run"])
    for a in rest:
        value = next(rest, None)
        if a == "--seed" and value is not None:
            try:
                seed = int(value)
            except ValueError:
                seed = -1
            if not SEED_MIN <= seed <= SEED_MAX:
                raise UsageError(f"--seed must be a whole number from {SEED_MIN} to {SEED_MAX}, not {value}")
        elif a == "--dtype" and value is not None:
            dtypes.append(value)
        else:
            raise UsageError(f"unexpected {a!r}. {USAGE}")
    return problem, seed, dtypes or None, dry


def _grade(args: list[str], cell: str) -> None:
    from torchcode.commands.common import wanted_dtypes
    from torchcode.commands.common import catalog, store
    from torchcode.errors import GraderError, StoreError

    global _last_problem
    problem, seed, asked, dry = _grade_args(args)
    cat = catalog(None)  # with the packs of the problems started in the kernel's folder (cat.remembered)
    spec = cat.get(problem)
    _last_problem = spec.id
    dtypes = wanted_dtypes(spec, asked)
    from torchcode.commands.watch import case_text

    warm = _session is not None and _session.running
    live = _Live()

    def on_event(ev: dict) -> None:
        if ev.get("event") == "case":
            live.show(_Html(f"Grading {spec.id}: {case_text(ev)}…"))

    try:  # an interrupt (the notebook's stop button) anywhere in here is said, never a traceback
        live.show(_Html(f"Grading {spec.id}…" if warm else f"Grading {spec.id}: starting the grader…"))
        s = session()
        report = s.grade(spec.id, source=cell, seed=seed, dtypes=dtypes, on_event=on_event, gpu_dry_run=dry,
                         imports_from=_here(), packs=cat.remembered)  # the kernel's folder now: `%cd` moves it
    except KeyboardInterrupt:
        live.show(_Html("Interrupted: the grade was stopped and nothing was recorded."))
        return None
    except GraderError as e:
        live.show(_Html(f"error: {e}"))
        return None
    note = ""
    st = store()
    try:
        from torchcode.progress.record import record_report

        record_report(st, report, None, source=cell.encode("utf-8"))
    except StoreError as e:
        note = f"warning: progress not saved: {e}"
    live.show(_rendered(lambda con: _report(con, report, spec.id)))
    for w in [*st.warnings, *([note] if note else [])]:
        print(w if w.startswith("warning") else f"warning: {w}", file=sys.stderr)
    return None


def _here() -> list[str]:
    """The folder a cell imports the notebook's modules from: the kernel's current one (none if it was removed)."""
    try:
        return [os.getcwd()]
    except OSError:
        return []


def _report(con, report, problem: str) -> None:
    from torchcode.render.report import report as render

    render(con, _in_cell(report), display_file="this cell", reproduce=f"%%torchcode {problem} --seed {report.seed}")


def in_cell(text: str, path: str) -> str:
    """Name the graded cell, not the temporary file it was graded from: its line numbers count the
    ``%%torchcode`` line, as the notebook shows them."""
    import re

    text = text.replace("`torchcode hint ", "`%torchcode hint ")  # the magic's form of the commands it names
    if not path or path not in text:
        return text
    quoted = re.compile(r'File "' + re.escape(path) + r'", line (\d+)')
    text = quoted.sub(lambda m: f'File "this cell", line {int(m.group(1)) + 1}', text)
    bare = re.compile(re.escape(path) + r"(?::(\d+))?(?::(\d+))?")
    return bare.sub(lambda m: "this cell" + (f", line {int(m.group(1)) + 1}" if m.group(1) else "")
                    + (f", column {m.group(2)}" if m.group(2) else ""), text)


def _in_cell(report):
    import dataclasses
    import re

    path = report.file
    cases = [dataclasses.replace(c, message=in_cell(c.message, path), traceback=in_cell(c.traceback, path))
             for c in report.cases]
    advice = [re.sub(r"\bline (\d+) \(", lambda m: f"this cell, line {int(m.group(1)) + 1} (", a) for a in report.advice]
    return dataclasses.replace(report, message=in_cell(report.message, path), traceback=in_cell(report.traceback, path),
                               cases=cases, advice=advice)


# -- hint, show, status ---------------------------------------------------------------------------

def _hint(problem: str, show_all: bool) -> None:
    from IPython.display import display

    from torchcode.commands.common import catalog, shown_progress, store
    from torchcode.errors import StoreError
    from torchcode.render.catalog import hints

    spec = catalog(None).get(problem)
    st = store()
    revealed = shown_progress(lambda: st.hints_revealed(spec.id), 0)
    if show_all and revealed == 0:
        print(f"No hint revealed yet for {spec.id}. `%torchcode hint {spec.id}` reveals the first.")
        return
    n, unsaved = revealed, None
    if not show_all:
        n = min(revealed + 1, len(spec.hints))
        try:
            n = st.reveal_hint(spec.id, len(spec.hints))
        except StoreError as e:
            unsaved = e
    display(_rendered(lambda con: hints(con, spec, list(spec.hints[:n]), len(spec.hints), only_last=not show_all)))
    if unsaved:
        print(f"warning: hint {n} is shown but could not be recorded as revealed: {unsaved}", file=sys.stderr)


def _show_statement(problem: str) -> None:
    """The statement as markdown: the notebook renders it, math included."""
    from IPython.display import Markdown, display

    from torchcode.commands.common import catalog

    from torchcode.scaffold import entry_signature

    spec = catalog(None).get(problem)
    forbidden = ", ".join(f"`{f}`" for f in spec.forbidden) or "nothing"
    display(Markdown(f"{spec.statement().rstrip()}\n\n---\n*{spec.difficulty}* · tags: {', '.join(spec.tags)} · "
                     f"implement `{entry_signature(spec)}` · forbidden here: {forbidden}"))


def _status() -> None:
    from IPython.display import display

    from torchcode.commands.common import catalog, shown_progress, store
    from torchcode.render.catalog import dashboard

    cat = catalog(None)
    st = store()
    progress = shown_progress(st.progress, {})
    display(_rendered(lambda con: dashboard(con, cat.ordered(), progress)))


# -- display --------------------------------------------------------------------------------------

class _Utf8(io.StringIO):
    encoding = "utf-8"  # so the report draws ✓ and ✗, not their ASCII stand-ins


_PRE = ("<pre style=\"white-space:pre;overflow-x:auto;line-height:1.25;"
        "font-family:Menlo,'DejaVu Sans Mono',Consolas,'Courier New',monospace\">{code}</pre>")


class _Live:
    """One output area, redrawn in place: progress lines, then the report."""

    def __init__(self):
        self.handle = None

    def show(self, obj) -> None:
        from IPython.display import display

        if self.handle is None:
            self.handle = display(obj, display_id=True)
        else:
            self.handle.update(obj)


class _Html:
    """Something the notebook shows as HTML (with a plain-text form for consoles and tests)."""

    def __init__(self, text: str, html: str | None = None):
        import html as html_lib

        self.text = text
        self.html = html if html is not None else f"<pre>{html_lib.escape(text)}</pre>"

    def _repr_html_(self) -> str:
        return self.html

    def __repr__(self) -> str:
        return self.text


def _rendered(draw) -> _Html:
    """What ``draw(console)`` prints, as HTML with its colours (rich's own export) and as text."""
    from rich.console import Console

    con = Console(file=_Utf8(), record=True, width=100, color_system="truecolor", force_terminal=True,
                  force_jupyter=False, highlight=False, soft_wrap=False)
    draw(con)
    text = con.export_text(clear=False)
    return _Html(text, con.export_html(inline_styles=True, code_format=_PRE))

"""Rendering of a check's report: verdict, per-case table, what to fix, how to reproduce."""

from __future__ import annotations

import re
import sys

from rich.console import Console
from rich.panel import Panel
from rich.text import Text

from torchcode.grader.result import Report, Verdict, plain_mismatch
from torchcode.render import verdict_label
from torchcode.render.terminal import glyphs, inert, inert_name


def report(con: Console, r: Report, *, display_file: str, pack: str | None = None,
           reproduce: str | None = None, every_case: bool = False, listed: str = "") -> None:
    """Text the submission controls (its output, messages, tracebacks) and the file name are shown inertly.
    ``pack``: the problem pack the problem comes from, when not the built-in course (for the reproduce line).
    ``reproduce``: how to re-run this grade, when not the `torchcode check` command line (Jupyter).
    ``every_case``: list the passing cases of a long report too (else counted); ``listed``: where they are listed."""
    g = glyphs(con.file)
    display_file = inert_name(display_file)
    style, label = verdict_label(r.verdict.value)
    head = Text.assemble((f"{label}", style), f"  {r.problem}  ", (display_file, "dim"),
                         f"  {r.cases_passed}/{len(r.cases)} cases  {r.seconds:.2f}s")
    con.print(head)
    # the stub: nothing done yet (an input form left unfinished, the rest passing, is reported case by case)
    stub = r.verdict is Verdict.NOT_IMPLEMENTED and not r.cases_passed
    early = stub or r.verdict in (Verdict.SYNTAX_ERROR, Verdict.BAD_INTERFACE) or not r.cases_passed and all(
        c.verdict is r.verdict or c.verdict is Verdict.NOT_RUN for c in r.cases) and r.verdict is not Verdict.WRONG_ANSWER
    if r.cases and not early and not r.passed:  # accepted: the head line says it all (`check --json` lists the cases)
        # a long table (minimind's 51 cases, or every dtype) lists the failing cases; the passing ones are counted
        rows = r.cases if every_case or len(r.cases) <= MAX_ROWS else [c for c in r.cases if not c.passed]
        case_w = max(len(c.name) for c in rows)
        res_w = max(len(verdict_label(c.verdict.value)[1]) for c in rows)
        con.print(Text(f"   {'case':<{case_w}}  {'result':<{res_w}}  what it checks", style="bold"))
        explained = _alike(_one_line(r.explained)) if r.explained else ""
        seen: dict[str, str] = {}  # a long message shown once: the cases after it say whose it is
        for c in rows:
            cs, cl = verdict_label(c.verdict.value)
            mark = (g["pass"], "green") if c.passed else (g["skip"] if c.verdict is Verdict.NOT_RUN else g["fail"], cs)
            head = Text.assemble(mark, "  ", f"{c.name:<{case_w}}", "  ", (f"{cl:<{res_w}}", cs), "  ")
            _hanging(con, head, c.targets, "dim")
            if not c.passed and c.verdict is not Verdict.NOT_RUN and c.message:  # each failure with its own message
                said, key = _one_line(c), _alike(_one_line(c))
                if len(key) > 100 and (key == explained or key in seen):  # the same advice, other figures
                    where = "explained below" if key == explained else f"under {seen[key]}"
                    said = f"{said.partition('. ')[0]}. As {where}."
                elif key:
                    seen.setdefault(key, c.name)
                _hanging(con, Text(" " * (case_w + 5)), inert(said), "")
        if len(rows) < len(r.cases):
            con.print(Text.assemble((g["pass"], "green"), f"  {_passing(r)}" + (f" ({listed})" if listed else "")))
    if r.passed:
        con.print("[green]All hidden cases pass: outputs and gradients match the reference.[/green]")
        for said in r.advice:
            _hanging(con, Text(f"{g['warn']} ", style="yellow"), inert(said), "yellow")
        return
    bad = r.explained
    body = Text()
    if bad and not stub:  # the stub: no case is about what is missing
        body.append("Case ", style="bold").append(bad.name, style="bold").append(f": {bad.targets}\n", style="dim")
        alike = [c.name for c in r.failing_like_explained]
        if len(alike) > 1:
            ran = sum(c.verdict is not Verdict.NOT_RUN for c in r.cases)
            body.append(f"{len(alike)} of {ran} cases fail this way ({_names(alike)}): look for a mistake they "
                        "share; this is the one explained here.\n", style="dim")
    if bad and bad.mismatch:
        m = bad.mismatch
        plain = bad.message.startswith(plain_mismatch(m))
        body.append(f"{m.what} does not match the reference." if plain else inert(bad.message))
        more = bad.message[len(plain_mismatch(m)):].lstrip(". ") if plain else ""
        if more:
            body.append("\n" + inert(more))
        body.append("\n\n")
        body.append(f"  {'where':<14}{m.what} at index {m.index} (shape {m.shape})\n")
        body.append(f"  {'expected':<14}{m.expected:.6g}\n")
        body.append(f"  {'got':<14}{m.got:.6g}\n")
        body.append(f"  {'max abs err':<14}{m.max_abs_err:.3g}   (allowed {m.allowed:.2g})\n")
        body.append(f"  {'max rel err':<14}{m.max_rel_err:.3g}\n")
        body.append(f"  {'elements off':<14}{m.bad:,} of {m.total:,}")
    else:
        body.append(inert(r.message or (bad.message if bad else "")))
    tb = (bad.traceback if bad else "") or r.traceback
    if tb and not stub:
        body.append("\n\n")
        body.append(inert(tb.rstrip()), style="yellow")
    con.print(Panel(body, title=Text(label, style=style), title_align="left", border_style=style.split()[-1]))
    if r.output.strip():
        con.print(Panel(Text(inert(r.output.rstrip())), title="your code printed", title_align="left", border_style="dim"))
    ran = any(c.verdict is not Verdict.NOT_RUN for c in r.cases)  # the seed matters only once cases ran
    if ran and not stub and r.verdict not in (Verdict.SYNTAX_ERROR, Verdict.BAD_INTERFACE):
        import shlex

        extra = f" --problems-dir {shlex.quote(inert(pack))}" if pack else ""
        if r.device == "cpu" and list(r.dtypes) != ["float32"]:  # the CPU grades float32 alone unless told
            every = list(r.dtypes) == ["float32", "bfloat16", "float16"]
            extra = (" --dtype all" if every else "".join(f" --dtype {d}" for d in r.dtypes)) + extra
        torch = sys.modules.get("torch")  # graded here: imported
        if r.device == "cpu" and torch is not None and torch.cuda.is_available():  # else `auto` picks the GPU
            extra = " --device cpu" + extra
        again = reproduce or (f"torchcode check {shlex.quote(display_file)} --problem {r.problem}"
                              f" --seed {r.seed}{extra}")
        con.print(Text(f"seed {r.seed}: reproduce with `{again}`", style="dim"), soft_wrap=True)


def _split(name: str) -> tuple[str, str]:
    """A case's name and dtype: "padding [bfloat16]" -> ("padding", "bfloat16"); float32's carry none."""
    base, _, dtype = name.partition(" [")
    return base, dtype.rstrip("]") or "float32"


MAX_ROWS = 30  # a report of more cases lists only those that fail


def _passing(r: Report) -> str:
    """The cases a long report does not list: "40 other cases pass" or, by dtype, "129 other cases pass: 40 in
    float32, 45 in bfloat16 and 44 in float16"."""
    by_dtype: dict[str, int] = {}
    for c in r.cases:
        if c.passed:
            dtype = _split(c.name)[1]
            by_dtype[dtype] = by_dtype.get(dtype, 0) + 1
    if not by_dtype:
        return "no case passes"
    counts = [f"{n} in {d}" for d, n in by_dtype.items()]
    n = sum(by_dtype.values())
    if len(counts) == 1:
        return f"{n} other case{'s' if n != 1 else ''} pass{'es' if n == 1 else ''}"
    said = ", ".join(counts[:-1]) + " and " + counts[-1]
    return f"{n} other cases pass: {said}"


def _names(names: list[str]) -> str:
    """Case names, those failing in every dtype graded said once: "a, b (in float32, bfloat16 and float16), c"."""
    dtypes: dict[str, list[str]] = {}
    for base, dtype in map(_split, names):
        dtypes.setdefault(base, []).append(dtype)
    if len(dtypes) == len(names):
        return ", ".join(names)
    groups: dict[tuple, list[str]] = {}
    for base, dts in dtypes.items():
        groups.setdefault(tuple(dts), []).append(base)
    said = []
    for dts, bases in groups.items():
        where = dts[0] if len(dts) == 1 else ", ".join(dts[:-1]) + " and " + dts[-1]
        said.append(f"{', '.join(bases)} in {where}")
    return "; ".join(said)


def _alike(message: str) -> str:
    """What a message advises past its first sentence (what was seen there, with its figures), its standalone
    figures left out (not those in a name: float16, x (call 2) keep theirs): two cases that fail the same way say
    the same advice. '' for a message of one sentence, which is all its own."""
    first, _, rest = message.partition(". ")
    if not rest or first.endswith(("e.g", "i.e")):
        return ""
    return re.sub(r"(?<![\w\[.(])(?<!call )(?<!head )\d+(\.\d+)?(e-?\d+)?(?![\w\]])", "#", rest)


def _one_line(c) -> str:
    """A failing case's own message, short enough for one line of the case table."""
    m = c.mismatch
    if m and c.message.startswith(plain_mismatch(m)):
        return (f"{m.what}: {m.bad:,} of {m.total:,} elements off, max abs err {m.max_abs_err:.3g} "
                f"(allowed {m.allowed:.2g})")
    return c.message.splitlines()[0] if c.message else ""


def _hanging(con: Console, head: Text, text: str, style: str) -> None:
    """``head`` then ``text`` wrapped at spaces under itself, so that on a narrow terminal or a pipe every
    word survives and no word (a case name, an id, ``kv-cache``) is split. When the column left beside
    ``head`` is too narrow to read, ``text`` goes on the lines below it, indented."""
    import textwrap

    width = con.width
    room = width - head.cell_len
    indent = head.cell_len
    if room < min(24, len(text)):
        first = head.copy()
        first.rstrip()
        if first.plain:
            con.print(first, no_wrap=True, crop=False)
        head, indent = Text(" " * min(5, indent)), min(5, indent)
        room = width - indent
    lines = textwrap.wrap(text, max(room, 10), break_long_words=False, break_on_hyphens=False) or [""]
    for i, part in enumerate(lines):
        line = head.copy() if i == 0 else Text(" " * indent)
        line.append(part, style=style)
        con.print(line, no_wrap=True, crop=False)

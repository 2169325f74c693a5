"""Rendering of the catalog, statements, hints and the progress dashboard."""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING

from torchcode.catalog.spec import ProblemSpec
from torchcode.progress import ProblemProgress

if TYPE_CHECKING:
    from rich.console import Console

DIFF_STYLE = {"easy": "green", "medium": "yellow", "hard": "red"}


def problem_table(problems: list[ProblemSpec], progress: dict[str, ProblemProgress],
                  suggestion: ProblemSpec | None, numbers: dict[str, int] | None = None) -> None:
    """The catalog grouped by topic, one aligned line per problem.

    Printed with typer's echo/style: rich's console costs ~20 ms to import, a fifth of `list`.
    """
    from typer import echo, style

    width = _width()
    id_w = max(len(p.id) for p in problems)
    title_w = max(len(p.title) for p in problems)
    solved = sum(1 for p in problems if progress.get(p.id) and progress[p.id].solved)
    echo(style("torchcode problems", bold=True) + f"  {len(problems)} shown, {solved} solved")
    head_w = 4 + 2 + id_w + 2 + title_w + 2 + 6 + 2 + 9 + 2
    narrow = width < head_w + 24  # the title and the tags go on lines of their own
    topic = None
    for n, p in enumerate(problems, 1):
        n = numbers.get(p.id, n) if numbers else n
        if p.topic != topic:
            topic = p.topic
            echo(style(topic, fg="cyan", bold=True))
        st = progress.get(p.id, ProblemProgress(p.id)).status
        diff, status = style(f"{p.difficulty:<6}", fg=_FG.get(p.difficulty)), style(f"{st:<9}", fg=_STATUS_FG.get(st), dim=st == "todo")
        if narrow:
            echo(f"{n:>4}  " + style(f"{p.id:<{id_w}}", bold=True) + f"  {diff}  "
                 + style(st, fg=_STATUS_FG.get(st), dim=st == "todo"))
            for line in [p.title, *_wrap(", ".join(p.tags), width - 6)]:
                echo(" " * 6 + (line if line == p.title else style(line, dim=True)))
            continue
        tags = _wrap(", ".join(p.tags), max(width - head_w - 1, 20))
        echo(f"{n:>4}  " + style(f"{p.id:<{id_w}}", bold=True) + f"  {p.title:<{title_w}}  {diff}  {status}  "
             + style(tags[0], dim=True))
        for more in tags[1:]:  # never cut: the tags wrap under themselves
            echo(" " * head_w + style(more, dim=True))
    if suggestion:
        echo(f"Next up: {style(suggestion.id, bold=True)} ({suggestion.title}). "
             f"Start it with {style(f'torchcode start {suggestion.id}', bold=True)}")


def _width() -> int:
    """COLUMNS when set (also for a pipe), else the terminal's width; a pipe without COLUMNS gets it all."""
    import os
    import shutil
    import sys

    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    return shutil.get_terminal_size((100, 24)).columns if sys.stdout.isatty() else 10**6


def _wrap(text: str, width: int) -> list[str]:
    """``text`` wrapped at spaces only: no tag (``kv-cache``) or id is split across lines."""
    import textwrap

    return textwrap.wrap(text, max(width, 10), break_long_words=False, break_on_hyphens=False) or [""]


_FG = {"easy": "green", "medium": "yellow", "hard": "red"}
_STATUS_FG = {"solved": "green", "attempted": "yellow"}


def statement(con: Console, p: ProblemSpec, revealed: int) -> None:
    from rich.console import Group
    from rich.markdown import Markdown  # markdown-it costs ~60 ms: only the commands that show text pay it
    from rich.panel import Panel
    from rich.text import Text

    from torchcode.scaffold import entry_signature

    meta = Text.assemble(("difficulty: ", "dim"), (p.difficulty, DIFF_STYLE.get(p.difficulty, "")),
                         ("   tags: ", "dim"), ", ".join(p.tags), ("   entry point: ", "dim"), entry_signature(p))
    text = p.statement()
    con.print(Panel(Group(meta, Markdown(text)), title=f"[bold]{p.id}[/bold]: {p.title}", expand=True))
    if not re.search(r"^#+\s*Forbidden", text, re.M | re.I):  # the statement's own section says it once
        con.print(f"[dim]Forbidden here:[/dim] {', '.join(p.forbidden) or 'nothing'}")
    con.print(f"[dim]Hints: {revealed} of {len(p.hints)} revealed (torchcode hint {p.id}). "
              f"Start with: torchcode start {p.id}[/dim]")
    if p.benchmarked:  # which problems can be timed, before a learner asks `bench` for one that cannot
        con.print(f"[dim]Once accepted, torchcode bench {p.id} times your kernel against the reference.[/dim]")


def hints(con: Console, p: ProblemSpec, shown: list[str], total: int, only_last: bool) -> None:
    from rich.markdown import Markdown
    from rich.panel import Panel

    items = list(enumerate(shown, 1))
    if only_last:
        items = items[-1:]
    for i, h in items:
        con.print(Panel(Markdown(h), title=f"Hint {i} of {total}", title_align="left", border_style="cyan"))
    if len(shown) >= total:
        con.print(f"[dim]That was the last hint. `torchcode solution {p.id}` shows the reference.[/dim]")


def dashboard(con: Console, problems: list[ProblemSpec], progress: dict[str, ProblemProgress]) -> None:
    from rich.table import Table
    from rich.text import Text

    from torchcode.render import STATUS_STYLE, verdict_label
    from torchcode.render.terminal import ASCII, glyphs

    counts = {"solved": 0, "attempted": 0, "todo": 0}
    id_w = max((len(p.id) for p in problems), default=2)
    narrow = con.width < id_w + 70  # the boxed table would cut words: a plain one, the last check beside the verdict
    table = Table(title="Your progress", header_style="bold", **({"box": None, "pad_edge": False} if narrow else {}))
    overflow = "fold" if narrow or glyphs(con.file) is ASCII else "ellipsis"  # rich's ellipsis is always "…"
    table.add_column("id", no_wrap=True, min_width=id_w)  # what you type: never cut
    table.add_column("status", no_wrap=True, min_width=9)
    columns = ("tries", "best") if narrow else ("attempts", "best time", "last verdict", "last check")
    for col in columns:
        table.add_column(col, overflow=overflow, no_wrap=narrow)
    if narrow:
        table.add_column("last check", overflow="fold")  # wraps at spaces: every word survives
    for p in problems:
        pr = progress.get(p.id, ProblemProgress(p.id))
        counts[pr.status] += 1
        style, label = verdict_label(pr.last_verdict) if pr.last_verdict else ("dim", "-")
        last = f"{label} ({pr.last_passed}/{pr.last_total})" if pr.last_verdict else "-"
        cells = [p.id, Text(pr.status, style=STATUS_STYLE[pr.status]), str(pr.attempts),
                 f"{pr.best_seconds * 1000:.1f} ms" if pr.best_seconds is not None else "-"]
        if narrow:
            cells.append(Text.assemble((last, style), f", {_ago(pr.last_at)}") if pr.last_verdict else Text("-", "dim"))
        else:
            cells += [Text(last, style=style if pr.last_verdict else "dim"), _ago(pr.last_at)]
        table.add_row(*cells)
    con.print(table)
    total = len(problems)
    con.print(f"[green]{counts['solved']} solved[/green], [yellow]{counts['attempted']} attempted[/yellow], "
              f"[dim]{counts['todo']} todo[/dim] of {total}")
    con.print("[dim]best time: the time your code ran over all hidden cases, in your fastest accepted check "
              "(not a benchmark: `torchcode bench PROBLEM` times it against the reference)[/dim]")


def _ago(ts: float | None) -> str:
    if ts is None:
        return "-"
    s = max(0, time.time() - ts)
    for unit, n in (("d", 86400), ("h", 3600), ("min", 60)):
        if s >= n:
            return f"{int(s // n)} {unit} ago"
    return "just now"

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
    import shutil
    import sys

    from typer import echo, style

    from torchcode.render.terminal import glyphs

    more = glyphs()["more"]
    width = shutil.get_terminal_size((100, 24)).columns if sys.stdout.isatty() else 10**6  # pipes get it all
    id_w = max(len(p.id) for p in problems)
    title_w = max(len(p.title) for p in problems)
    solved = sum(1 for p in problems if progress.get(p.id) and progress[p.id].solved)
    echo(style("torchcode problems", bold=True) + f"  {len(problems)} shown, {solved} solved")
    topic = None
    for n, p in enumerate(problems, 1):
        n = numbers.get(p.id, n) if numbers else n
        if p.topic != topic:
            topic = p.topic
            echo(style(topic, fg="cyan", bold=True))
        st = progress.get(p.id, ProblemProgress(p.id)).status
        head = f"{n:>4}  {p.id:<{id_w}}  {p.title:<{title_w}}  {p.difficulty:<6}  {st:<9}  "
        tags = ", ".join(p.tags)
        room = max(width - len(head) - 1, 0)
        tags = tags if len(tags) <= room else tags[: max(room - len(more), 0)] + more
        echo(f"{n:>4}  " + style(f"{p.id:<{id_w}}", bold=True) + f"  {p.title:<{title_w}}  "
             + style(f"{p.difficulty:<6}", fg=_FG.get(p.difficulty)) + "  "
             + style(f"{st:<9}", fg=_STATUS_FG.get(st), dim=st == "todo") + "  " + style(tags, dim=True))
    if suggestion:
        echo(f"Next up: {style(suggestion.id, bold=True)} ({suggestion.title}). "
             f"Start it with {style(f'torchcode start {suggestion.id}', bold=True)}")


_FG = {"easy": "green", "medium": "yellow", "hard": "red"}
_STATUS_FG = {"solved": "green", "attempted": "yellow"}


def statement(con: Console, p: ProblemSpec, revealed: int) -> None:
    from rich.console import Group
    from rich.markdown import Markdown  # markdown-it costs ~60 ms: only the commands that show text pay it
    from rich.panel import Panel
    from rich.text import Text

    meta = Text.assemble(("difficulty: ", "dim"), (p.difficulty, DIFF_STYLE.get(p.difficulty, "")),
                         ("   tags: ", "dim"), ", ".join(p.tags), ("   entry point: ", "dim"), p.entry.signature())
    text = p.statement()
    con.print(Panel(Group(meta, Markdown(text)), title=f"[bold]{p.id}[/bold]: {p.title}", expand=True))
    if not re.search(r"^#+\s*Forbidden", text, re.M | re.I):  # the statement's own section says it once
        con.print(f"[dim]Forbidden here:[/dim] {', '.join(p.forbidden) or 'nothing'}")
    con.print(f"[dim]Hints: {revealed} of {len(p.hints)} revealed (torchcode hint {p.id}). "
              f"Start with: torchcode start {p.id}[/dim]")


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
    table = Table(title="Your progress", header_style="bold")
    overflow = "fold" if glyphs(con.file) is ASCII else "ellipsis"  # rich's ellipsis is always "…"
    table.add_column("id", no_wrap=True, min_width=max((len(p.id) for p in problems), default=2))  # what you type: never cut
    for col in ("status", "attempts", "best time", "last verdict", "last check"):
        table.add_column(col, overflow=overflow)
    for p in problems:
        pr = progress.get(p.id, ProblemProgress(p.id))
        counts[pr.status] += 1
        style, label = verdict_label(pr.last_verdict) if pr.last_verdict else ("dim", "-")
        last = f"{label} ({pr.last_passed}/{pr.last_total})" if pr.last_verdict else "-"
        table.add_row(p.id, Text(pr.status, style=STATUS_STYLE[pr.status]), str(pr.attempts),
                      f"{pr.best_seconds * 1000:.1f} ms" if pr.best_seconds is not None else "-",
                      Text(last, style=style if pr.last_verdict else "dim"), _ago(pr.last_at))
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

"""Rendering of the catalog, statements, hints and the progress dashboard."""

from __future__ import annotations

import time

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from torchcode.catalog.spec import ProblemSpec
from torchcode.progress import ProblemProgress
from torchcode.render import STATUS_STYLE, verdict_label

DIFF_STYLE = {"easy": "green", "medium": "yellow", "hard": "red"}


def problem_table(con: Console, problems: list[ProblemSpec], progress: dict[str, ProblemProgress],
                  suggestion: ProblemSpec | None) -> None:
    table = Table(title="torchcode problems", title_style="bold", header_style="bold")
    for col in ("#", "id", "title", "difficulty", "tags", "status"):
        table.add_column(col, no_wrap=col in ("id", "status"))
    topic = None
    for n, p in enumerate(problems, 1):
        if p.topic != topic:
            topic = p.topic
            table.add_section() if n > 1 else None
            table.add_row("", Text(topic, style="bold cyan"), "", "", "", "")
        st = progress.get(p.id, ProblemProgress(p.id)).status
        table.add_row(str(n), p.id, p.title, Text(p.difficulty, style=DIFF_STYLE.get(p.difficulty, "")),
                      ", ".join(p.tags), Text(st, style=STATUS_STYLE[st]))
    con.print(table)
    if suggestion:
        con.print(f"Next up: [bold]{suggestion.id}[/bold] ({suggestion.title}). Start it with "
                  f"[bold]torchcode start {suggestion.id}[/bold]")


def statement(con: Console, p: ProblemSpec, revealed: int) -> None:
    from rich.markdown import Markdown  # markdown-it costs ~60 ms: only the commands that show text pay it

    meta = Text.assemble(("difficulty: ", "dim"), (p.difficulty, DIFF_STYLE.get(p.difficulty, "")),
                         ("   tags: ", "dim"), ", ".join(p.tags), ("   entry point: ", "dim"), p.entry.signature())
    con.print(Panel(Group(meta, Markdown(p.statement())), title=f"[bold]{p.id}[/bold]: {p.title}", expand=True))
    forbidden = ", ".join(p.forbidden) or "nothing"
    con.print(f"[dim]Forbidden here:[/dim] {forbidden}")
    con.print(f"[dim]Hints: {revealed} of {len(p.hints)} revealed (torchcode hint {p.id}). "
              f"Start with: torchcode start {p.id}[/dim]")


def hints(con: Console, p: ProblemSpec, shown: list[str], total: int, only_last: bool) -> None:
    from rich.markdown import Markdown

    items = list(enumerate(shown, 1))
    if only_last:
        items = items[-1:]
    for i, h in items:
        con.print(Panel(Markdown(h), title=f"Hint {i} of {total}", title_align="left", border_style="cyan"))
    if len(shown) >= total:
        con.print(f"[dim]That was the last hint. `torchcode solution {p.id}` shows the reference.[/dim]")


def dashboard(con: Console, problems: list[ProblemSpec], progress: dict[str, ProblemProgress]) -> None:
    counts = {"solved": 0, "attempted": 0, "todo": 0}
    table = Table(title="Your progress", header_style="bold")
    for col in ("id", "status", "attempts", "best time", "last verdict", "last check"):
        table.add_column(col)
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


def _ago(ts: float | None) -> str:
    if ts is None:
        return "-"
    s = max(0, time.time() - ts)
    for unit, n in (("d", 86400), ("h", 3600), ("min", 60)):
        if s >= n:
            return f"{int(s // n)} {unit} ago"
    return "just now"

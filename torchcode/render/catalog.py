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
    """The catalog grouped by topic, one aligned line per problem (rich's Table costs ~45 ms here)."""
    id_w = max(len(p.id) for p in problems)
    title_w = max(len(p.title) for p in problems)
    solved = sum(1 for p in problems if progress.get(p.id) and progress[p.id].solved)
    con.print(Text.assemble(("torchcode problems", "bold"), f"  {len(problems)} shown, {solved} solved"))
    topic = None
    for n, p in enumerate(problems, 1):
        if p.topic != topic:
            topic = p.topic
            con.print(Text(topic, style="bold cyan"))
        st = progress.get(p.id, ProblemProgress(p.id)).status
        line = Text.assemble(f"{n:>4}  ", (f"{p.id:<{id_w}}", "bold"), f"  {p.title:<{title_w}}  ",
                             (f"{p.difficulty:<6}", DIFF_STYLE.get(p.difficulty, "")), "  ",
                             (f"{st:<9}", STATUS_STYLE[st]), "  ", (", ".join(p.tags), "dim"))
        line.truncate(con.width, overflow="ellipsis")
        con.print(line, no_wrap=True)
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

"""Rendering of a problem's attempts (`torchcode history`)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console


def when(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at))


def history(con: Console, problem: str, attempts: list[dict]) -> None:
    from rich.table import Table
    from rich.text import Text

    from torchcode.render import verdict_label

    if not attempts:
        con.print(f"No attempt of {problem} is recorded yet: `torchcode check {problem}` records one.",
                  markup=False)
        return
    table = Table(title=f"{problem}: {len(attempts)} attempt{'s' if len(attempts) != 1 else ''}",
                  header_style="bold", title_justify="left", box=None, pad_edge=False)
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("time", no_wrap=True)
    table.add_column("verdict")
    table.add_column("cases", justify="right", no_wrap=True)
    table.add_column("seed", justify="right", no_wrap=True)
    table.add_column("duration", justify="right", no_wrap=True)
    for n, a in enumerate(attempts, 1):
        style, label = verdict_label(a["verdict"])
        table.add_row(str(n), when(a["at"]), Text(label, style=style), f"{a['passed']}/{a['total']}",
                      str(a["seed"]), f"{a['seconds']:.2f}s")
    con.print(table)
    kept = [n for n, a in enumerate(attempts, 1) if a["has_source"]]
    if kept:
        con.print(f"[dim]`torchcode history {problem} --show N` prints attempt N's source; "
                  f"`--diff N M` compares two.[/dim]")
    if len(kept) < len(attempts):
        con.print(f"[dim]{len(attempts) - len(kept)} attempt(s) were recorded without their source "
                  "(by an older torchcode).[/dim]")

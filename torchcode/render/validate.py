"""Rendering of `validate` results: one line per check, with the file and the fix on failure."""

from __future__ import annotations

import os

from rich.console import Console


def results(con: Console, items) -> None:
    for pv in items:
        mark = "[green]PASS[/green]" if pv.ok else "[red]FAIL[/red]"
        con.print(f"{mark} [bold]{pv.problem}[/bold]")
        for it in pv.items:
            if it.ok:
                con.print(f"   [green]ok[/green]   {it.check:<10} {it.what}", markup=True, highlight=False)
            else:
                con.print(f"   [red]fail[/red] {it.check:<10} {it.what}", highlight=False)
                if it.file:
                    con.print(f"        file: {os.path.relpath(it.file)}", highlight=False)
                if it.fix:
                    con.print(f"        fix:  {it.fix}", highlight=False)
    bad = [pv.problem for pv in items if not pv.ok]
    total = len(items)
    if bad:
        con.print(f"[red]{len(bad)} of {total} problems failed validation:[/red] {', '.join(bad)}")
    else:
        con.print(f"[green]All {total} problems are valid.[/green]")

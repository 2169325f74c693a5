"""Rendering of `validate` results: one line per check, with the file and the fix on failure."""

from __future__ import annotations

import os

from rich.console import Console
from rich.markup import escape


def results(con: Console, items) -> None:
    for pv in items:
        problem(con, pv)
    summary(con, items)


def problem(con: Console, pv) -> None:
    """One problem's checks, printed as soon as it is validated."""
    mark = "[green]PASS[/green]" if pv.ok else "[red]FAIL[/red]"
    con.print(f"{mark} [bold]{pv.problem}[/bold]")
    for it in pv.items:
        if it.ok:
            con.print(f"   [green]ok[/green]   {it.check:<10} {escape(it.what)}", highlight=False, soft_wrap=True)
        else:
            con.print(f"   [red]fail[/red] {it.check:<10} {escape(it.what)}", highlight=False, soft_wrap=True)
            if it.file:
                con.print(f"        file: {escape(os.path.relpath(it.file))}", highlight=False, soft_wrap=True)
            if it.fix:
                con.print(f"        fix:  {escape(it.fix)}", highlight=False, soft_wrap=True)


def summary(con: Console, items, variants: bool = True) -> None:
    bad = [pv.problem for pv in items if not pv.ok]
    total = len(items)
    if bad:
        con.print(f"[red]{len(bad)} of {total} problems failed validation:[/red] {', '.join(bad)}")
    elif not variants:
        con.print(f"[green]{'All ' + str(total) + ' problems pass' if total > 1 else 'The problem passes'}[/green] "
                  "everything but the variants (not graded: --no-variants).")
    else:
        con.print(f"[green]{'All ' + str(total) + ' problems are' if total > 1 else 'The problem is'} valid.[/green]")

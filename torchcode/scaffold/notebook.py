"""`torchcode start PROBLEM --notebook`: a Jupyter notebook to solve PROBLEM in.

The notebook is written as plain nbformat 4 JSON (no Jupyter package is needed to write it):
the statement as markdown, a cell that loads the extension, the stub in a cell that begins
with the ``%%torchcode PROBLEM`` magic (running it grades the cell in the sandbox), and an
empty scratch cell.
"""

from __future__ import annotations

import json

from torchcode.catalog.spec import ProblemSpec
from torchcode.scaffold import _render_stub, docstring, entry_signature

MAGIC = "%%torchcode"


def _cell(cell_id: str, kind: str, text: str) -> dict:
    cell = {"cell_type": kind, "id": cell_id, "metadata": {}, "source": text.splitlines(keepends=True)}
    if kind == "code":
        cell.update(execution_count=None, outputs=[])
    return cell


def render_notebook(spec: ProblemSpec) -> str:
    from torchcode.paths import builtin_pack

    pack = spec.pack.resolve()  # a problem from a pack: the notebook's kernel (and its grading session) needs it too
    load = ("" if pack == builtin_pack().resolve() else f"%env TORCHCODE_PROBLEMS={pack}\n") + "%load_ext torchcode"
    about = (f"*{spec.difficulty}* · tags: {', '.join(spec.tags)} · implement `{entry_signature(spec)}`"
             + (f" · forbidden here: {', '.join(f'`{f}`' for f in spec.forbidden)}" if spec.forbidden else ""))
    how = (f"**How to work here.** Run the next cell once to load torchcode. Then fill in the cell after it and run "
           f"it: the `{MAGIC} {spec.id}` line grades the cell's code on hidden cases in a separate sandbox "
           f"(your kernel never runs it) and records the attempt, as `torchcode check` does.\n\n"
           f"`%torchcode hint {spec.id}` reveals the next hint, `%torchcode show {spec.id}` shows this statement, "
           f"`%torchcode status` your progress. Use the last cell as scratch space.")
    stub = _render_stub(spec, header=docstring(f"torchcode problem '{spec.id}': {spec.title}"))
    cells = [
        _cell("statement", "markdown", f"{spec.statement().rstrip()}\n\n---\n{about}\n"),
        _cell("how-to", "markdown", how),
        _cell("load", "code", load),
        _cell("solution", "code", f"{MAGIC} {spec.id}\n{stub.rstrip()}\n"),
        _cell("scratch", "code", ""),
    ]
    for c in cells:  # no trailing newline on a cell's last line, as Jupyter writes them
        if c["source"]:
            c["source"][-1] = c["source"][-1].rstrip("\n")
    nb = {
        "cells": cells,
        "metadata": {
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "language_info": {"name": "python"},
            "torchcode": {"problem": spec.id},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n"

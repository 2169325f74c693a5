"""`torchcode list`: the catalog with the learner's status, grouped by topic."""

from __future__ import annotations

from pathlib import Path

from torchcode.commands.common import catalog, shown_progress, store, warn_store
from torchcode.errors import UsageError
from torchcode.render.catalog import problem_table


def run(problems_dirs: list[Path] | None, tag: str | None, difficulty: str | None) -> int:
    cat = catalog(problems_dirs)
    problems = cat.ordered()
    numbers = {p.id: n for n, p in enumerate(problems, 1)}  # filters keep the numbers `show N` takes
    if tag:
        tags = sorted({t for p in problems for t in p.tags})
        wanted = next((t for t in tags if t.lower() == tag.lower()), None)
        if wanted is None:
            raise UsageError(f"no problem has the tag {tag!r}. Tags: {', '.join(tags)}")
        problems = [p for p in problems if wanted in p.tags]
    if difficulty:
        if difficulty.lower() not in ("easy", "medium", "hard"):
            raise UsageError(f"--difficulty must be easy, medium or hard, not {difficulty!r}")
        problems = [p for p in problems if p.difficulty == difficulty.lower()]
    st = store()
    progress = shown_progress(st.progress, {})
    warn_store(st)
    suggestion = next((p for p in problems if not (progress.get(p.id) and progress[p.id].solved)), None)
    if not problems:
        from typer import echo

        echo("No problem matches those filters.")
        return 0
    problem_table(problems, progress, suggestion, numbers)
    return 0

"""`torchcode validate`: prove problems are sound (stub fails, reference passes, mutants die)."""

from __future__ import annotations

from pathlib import Path

from torchcode.catalog import load_catalog
from torchcode.render import console


def run(problems: list[str] | None, problems_dirs: list[Path] | None, seeds: int) -> int:
    from torchcode.grader.judge import Grader  # before anything computes: the zygote forks here

    grader = Grader()
    try:
        cat = load_catalog(problems_dirs)
        if problems:
            ids = problems
            for pid in ids:
                if pid not in cat.problems and pid not in cat.broken:
                    cat.get(pid)  # raises ProblemNotFound with suggestions
        elif problems_dirs:
            packs = {p.expanduser().resolve() for p in problems_dirs}
            ids = sorted([s.id for s in cat.ordered() if s.pack in packs]
                         + [pid for pid, e in cat.broken.items() if Path(e.path).resolve().parents[2] in packs])
        else:
            ids = cat.ids() + sorted(cat.broken)
        from torchcode.authoring.validate import validate
        from torchcode.render.validate import results as render

        results = validate(cat, ids, grader, tuple(range(max(1, seeds))))
    finally:
        grader.close()
    render(console(), results)
    return 0 if all(r.ok for r in results) else 1

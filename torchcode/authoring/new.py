"""`new`: scaffold a problem folder, reference and stub template in a pack, every field commented.

The scaffold is a small working problem (plain attention) that validates as written, so an
author starts from green and changes one thing at a time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from string import Template

from torchcode.errors import UsageError

SKELETON = Path(__file__).resolve().parent / "skeleton"
_ID = re.compile(r"^[a-z][a-z0-9_]*$")


@dataclass
class Created:
    pack: Path
    files: list[Path]


def entry_name(problem_id: str, kind: str) -> str:
    if kind == "module":
        return "".join(part.capitalize() for part in problem_id.split("_"))
    return problem_id


def new_problem(problem_id: str, kind: str, pack: Path, title: str | None = None) -> Created:
    if not _ID.match(problem_id):
        raise UsageError(f"'{problem_id}' is not a valid problem id: use lower-case letters, digits and underscores")
    if kind not in ("function", "module"):
        raise UsageError("--kind must be 'function' or 'module'")
    pack = pack.resolve()
    folder = pack / "problems" / problem_id
    targets = {
        "problem.toml": folder / "problem.toml",
        "statement.md": folder / "statement.md",
        "cases.py": folder / "cases.py",
        "wrong_missing_scale.py": folder / "wrong" / "missing_scale.py",
        "right_einsum.py": folder / "right" / "einsum.py",
        "solution.py": pack / "solutions" / f"{problem_id}.py",
        "template.py.j2": pack / "templates" / f"{problem_id}.py.j2",
    }
    existing = [p for p in targets.values() if p.exists()]
    if existing:
        raise UsageError(f"not overwriting existing files: {', '.join(map(str, existing))}")
    values = {"id": problem_id, "name": entry_name(problem_id, kind), "order": str(_next_order(pack)),
              "title": title or problem_id.replace("_", " ").title()}
    for src, dst in targets.items():
        src += ".tmpl" if src.endswith(".py") else ""  # skeleton sources are not importable Python
        text = Template((SKELETON / kind / src).read_text(encoding="utf-8")).substitute(_quoted(values, src))
        text = _comments_aligned(text) if src.endswith(".toml") else text
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_text(text, encoding="utf-8")
    return Created(pack, list(targets.values()))


def _next_order(pack: Path, first: int = 500, step: int = 10) -> int:
    """After the pack's problems in the recommended order (each new problem used to get 500: `list` then sorted them
    by id, not in the order they were written). A problem.toml that cannot be read is skipped: validate names it."""
    import tomllib

    orders = []
    for toml in (pack / "problems").glob("*/problem.toml"):
        try:
            order = tomllib.loads(toml.read_text(encoding="utf-8")).get("order")
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
            continue
        if isinstance(order, int) and not isinstance(order, bool):
            orders.append(order)
    return max(first, max(orders, default=first - step) + step)


def _comments_aligned(toml: str, column: int = 36) -> str:
    """The skeleton's trailing comments in one column again once the id and name are filled in."""
    import re

    def align(m: re.Match) -> str:
        return f"{m[1]:<{column - 1}} {m[2]}" if len(m[1]) < column - 1 else f"{m[1]}  {m[2]}"

    return re.sub(r"^([a-z_]+ = \S.*?) {2,}(# .*)$", align, toml, flags=re.M)


def _quoted(values: dict, src: str) -> dict:
    """The values as the file they go in needs them: a title with quotes or backslashes (`The "ALiBi" layer`)
    inside a TOML string or a Python docstring (it wrote a problem.toml that did not parse)."""
    import json

    if src.endswith(".toml"):
        return {k: json.dumps(v)[1:-1] for k, v in values.items()}  # a JSON string's escapes are TOML's too
    if src.endswith(".tmpl"):
        return {k: v.replace("\\", "\\\\").replace('"', '\\"') for k, v in values.items()}
    return values

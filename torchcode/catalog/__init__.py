"""The catalog: every problem of the built-in course and of extra packs, found by walking folders.

The package never hard-codes the list: a problem exists because its folder does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from torchcode import paths
from torchcode.cache import DerivedCache
from torchcode.catalog.spec import ProblemSpec, load_spec
from torchcode.errors import ProblemNotFound, SpecError, UsageError

__all__ = ["Catalog", "ProblemSpec", "load_catalog"]


@dataclass
class Catalog:
    problems: dict[str, ProblemSpec] = field(default_factory=dict)
    broken: dict[str, SpecError] = field(default_factory=dict)  # id (folder name) -> why it cannot load

    def ordered(self) -> list[ProblemSpec]:
        return sorted(self.problems.values(), key=lambda p: (p.order, p.id))

    def get(self, problem_id: str) -> ProblemSpec:
        if problem_id in self.problems:
            return self.problems[problem_id]
        if problem_id in self.broken:
            raise self.broken[problem_id]
        raise ProblemNotFound(problem_id, sorted(self.problems))

    def ids(self) -> list[str]:
        return [p.id for p in self.ordered()]


def load_catalog(problems_dirs: list[Path] | None = None, *, builtin: bool = True) -> Catalog:
    """Load the built-in course plus every extra pack; an id defined twice is an error."""
    packs = ([paths.builtin_pack()] if builtin else []) + paths.extra_packs(problems_dirs)
    catalog = Catalog()
    cache = DerivedCache("problem-specs")
    origin: dict[str, Path] = {}
    for pack in packs:
        pack = pack.expanduser().resolve()
        if not pack.is_dir():
            raise UsageError(f"problem pack {pack} does not exist or is not a folder")
        root = pack / "problems"
        if not root.is_dir():
            raise UsageError(f"problem pack {pack} has no problems/ folder (a pack holds problems/, solutions/ and templates/)")
        for folder in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))):
            if folder.name in origin:
                raise UsageError(
                    f"problem id '{folder.name}' is defined twice: in {origin[folder.name]} and in {folder}. "
                    "Rename one of them.")
            origin[folder.name] = folder
            try:
                spec = load_spec(folder, pack, cache)
            except SpecError as e:
                catalog.broken[folder.name] = e
                continue
            catalog.problems[spec.id] = spec
    cache.save()
    return catalog

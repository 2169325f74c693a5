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
    named: list[Path] = field(default_factory=list)  # the packs named (--problems-dir, TORCHCODE_PROBLEMS), as given
    remembered: list[Path] = field(default_factory=list)  # packs added because a folder remembers them (not named)
    unloaded: dict[str, str] = field(default_factory=dict)  # a remembered pack left out -> why
    moved: dict[str, str] = field(default_factory=dict)  # a problem started here whose remembered pack is left out

    def ordered(self) -> list[ProblemSpec]:
        return sorted(self.problems.values(), key=lambda p: (p.order, p.id))

    def get(self, problem_id: str) -> ProblemSpec:
        """A problem by its id, or as the learner may type it: the number `torchcode list` prints,
        any case, ``-`` for ``_`` (``show 10``, ``show GQA``, ``start kv-cache``)."""
        problem_id = self.find(problem_id) or problem_id
        if problem_id in self.problems:
            return self.problems[problem_id]
        if problem_id in self.broken:
            raise self.broken[problem_id]
        if problem_id.strip().isdigit():
            raise UsageError(f"there is no problem number {problem_id.strip()}: `torchcode list` numbers them "
                             f"from 1 to {len(self.problems)}")
        if problem_id in self.moved:  # not "no problem named": the folder knows where it came from
            raise UsageError(f"{problem_id} was started in this directory from the problem pack {self.moved[problem_id]}"
                             ": add --problems-dir PACK once, naming where it is now, and this folder remembers that")
        raise ProblemNotFound(problem_id, sorted(self.problems))

    def find(self, text: str) -> str | None:
        """The id ``text`` names (see ``get``), or None."""
        if text in self.problems or text in self.broken:
            return text
        text = text.strip()
        if text.isdigit():
            ordered = self.ordered()
            return ordered[int(text) - 1].id if 1 <= int(text) <= len(ordered) else None
        key = text.lower().replace("-", "_")
        return next((pid for pid in [*self.problems, *self.broken] if pid.lower().replace("-", "_") == key), None)

    def number(self, problem_id: str) -> int:
        """The number `torchcode list` prints for a problem (its place in the recommended order)."""
        return self.ids().index(problem_id) + 1

    def ids(self) -> list[str]:
        return [p.id for p in self.ordered()]


def load_catalog(problems_dirs: list[Path] | None = None, *, builtin: bool = True) -> Catalog:
    """Load the built-in course plus every extra pack; an id defined twice is an error."""
    packs = ([paths.builtin_pack()] if builtin else []) + paths.extra_packs(problems_dirs)
    catalog = Catalog()
    cache = DerivedCache("problem-specs")
    origin: dict[str, Path] = {}
    seen: set[Path] = set()
    for pack in packs:
        pack = pack.expanduser().resolve()
        if pack in seen:  # the same pack named twice (--problems-dir and TORCHCODE_PROBLEMS) is one pack
            continue
        seen.add(pack)
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


def with_remembered(problems_dirs: list[Path] | None, remembered: list[Path],
                    started: dict[str, str] | None = None) -> Catalog:
    """``load_catalog(problems_dirs)`` plus each pack of ``remembered`` (the packs a folder's problems were started
    from, the latest first) that can join it; one that has moved, or holds an id another pack has, is left out alone
    (``Catalog.unloaded`` says why). The built-in course and packs already in are skipped."""
    cat = load_catalog(problems_dirs)
    have = {paths.builtin_pack().resolve(), *(p.pack.resolve() for p in cat.problems.values())}
    added: list[Path] = []
    unloaded: dict[str, str] = {}
    for pack in remembered:
        if not pack.is_dir():
            unloaded[str(pack)] = "it is no longer there"
            continue
        if pack.resolve() in have:
            continue
        try:
            cat = load_catalog([*(problems_dirs or []), *added, pack])
        except UsageError as e:
            unloaded[str(pack)] = str(e)
            continue
        added.append(pack)
        have.add(pack.resolve())
    cat.remembered, cat.unloaded, cat.named = added, unloaded, paths.extra_packs(problems_dirs)
    for pid, pack in (started or {}).items():  # problem -> the pack it was started from here
        if pid not in cat.problems and pack in unloaded:
            cat.moved[pid] = f"{pack}, which " + ("is no longer there" if unloaded[pack] == "it is no longer there"
                                                 else f"cannot be loaded here ({unloaded[pack]})")
    return cat

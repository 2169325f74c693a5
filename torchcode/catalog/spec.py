"""The problem format: ``problem.toml`` parsed and validated into a ``ProblemSpec``.

A problem is data. Its folder ``problems/<id>/`` holds:

- ``problem.toml``  metadata, entry point, hints, rules, grading policy (this module);
- ``statement.md``  the statement, rendered by ``show`` and put in the stub's docstring;
- ``cases.py``      hidden cases, written with ``torchcode.grader.cases``;
- ``wrong/*.py``    known-wrong submissions the suite proves are rejected;
- ``right/*.py``    correct alternatives the suite proves are accepted.

Next to ``problems/`` in the same pack: ``solutions/<id>.py`` (the reference kernel)
and ``templates/<id>.py.j2`` (the stub). No torch here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from torchcode.errors import SpecError

FORMAT_VERSIONS = (1,)
DIFFICULTIES = ("easy", "medium", "hard")
DTYPES = ("float32", "bfloat16", "float16")
ALWAYS_FORBIDDEN = (
    "torch.nn.functional.scaled_dot_product_attention",
    "torch.nn.MultiheadAttention",
    "torch.nn.functional.multi_head_attention_forward",
)
_ID = re.compile(r"^[a-z][a-z0-9_]*$")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# every field format 1 knows, by table ("" is the top level): any other key is a typo, never ignored
FIELDS = {
    "": ("format", "id", "title", "difficulty", "order", "topic", "tags", "summary", "hints",
         "entry", "rules", "grading", "bench"),
    "entry": ("kind", "name", "params", "init", "parameters"),
    "rules": ("forbidden", "allowed"),
    "grading": ("time_limit", "factor", "floor", "dtypes"),
    "bench": ("cpu", "cuda"),
}


@dataclass(frozen=True)
class EntryPoint:
    kind: str  # "function" or "module"
    name: str  # function or class name the learner defines
    params: tuple[str, ...]  # function parameters, or forward() parameters after self
    init: tuple[str, ...] = ()  # module constructor parameters after self
    parameters: tuple[str, ...] = ()  # module parameter names (the weight contract)

    @property
    def is_module(self) -> bool:
        return self.kind == "module"

    def signature(self) -> str:
        if self.is_module:
            return f"class {self.name}(nn.Module): __init__(self, {', '.join(self.init)}); forward(self, {', '.join(self.params)})"
        return f"{self.name}({', '.join(self.params)})"


@dataclass(frozen=True)
class GradingPolicy:
    time_limit: float = 5.0  # seconds of wall time per hidden case
    factor: float = 10.0  # learner error may be this many times the float32 reference's own error
    floor: float = 1e-5  # ... plus this fraction of the expected tensor's largest magnitude
    dtypes: tuple[str, ...] = ("float32",)  # graded in these; the first is the CPU default


@dataclass(frozen=True)
class ProblemSpec:
    id: str
    title: str
    difficulty: str
    order: int
    topic: str
    tags: tuple[str, ...]
    summary: str
    entry: EntryPoint
    hints: tuple[str, ...]
    forbidden: tuple[str, ...]
    grading: GradingPolicy
    folder: Path  # problems/<id>
    pack: Path  # the pack root holding problems/, solutions/, templates/
    format: int = 1
    bench_sizes: dict = field(default_factory=dict, compare=False)  # device -> sizes for `bench`

    @property
    def benchmarked(self) -> bool:
        """Whether `bench` can time it: problem.toml's [bench] names sizes for some device."""
        return any(self.bench_sizes.values())

    @property
    def statement_path(self) -> Path:
        return self.folder / "statement.md"

    @property
    def cases_path(self) -> Path:
        return self.folder / "cases.py"

    @property
    def solution_path(self) -> Path:
        return self.pack / "solutions" / f"{self.id}.py"

    @property
    def template_path(self) -> Path:
        return self.pack / "templates" / f"{self.id}.py.j2"

    def statement(self) -> str:
        try:
            return self.statement_path.read_text(encoding="utf-8")
        except OSError as e:
            raise SpecError(self.statement_path, None, f"cannot read the statement ({e.strerror})",
                            "add statement.md to the problem folder") from None

    def variants(self, kind: str) -> list[Path]:
        """Known-wrong (``kind='wrong'``) or correct alternative (``'right'``) submissions."""
        d = self.folder / kind
        return sorted(d.glob("*.py")) if d.is_dir() else []


def load_spec(folder: Path, pack: Path, cache=None) -> ProblemSpec:
    """Parse and validate ``folder/problem.toml``; raise SpecError naming file, field and fix.

    ``cache`` (a ``DerivedCache``) may supply the parse; validation always runs.
    """
    path = folder / "problem.toml"

    def parse() -> dict:
        import tomllib

        return tomllib.loads(path.read_text(encoding="utf-8"))

    try:
        raw = cache.get(str(path), [path], parse) if cache is not None else parse()
    except FileNotFoundError:
        raise SpecError(path, None, "file is missing", "every problem folder needs a problem.toml") from None
    except (OSError, UnicodeDecodeError) as e:
        raise SpecError(path, None, f"cannot be read ({e})") from None
    except ValueError as e:  # tomllib.TOMLDecodeError
        raise SpecError(path, None, f"not valid TOML ({e})", "fix the syntax at that line") from None
    return _Validator(path, raw, folder, pack).spec()


class _Validator:
    def __init__(self, path: Path, raw: dict, folder: Path, pack: Path):
        self.path, self.raw, self.folder, self.pack = path, raw, folder, pack

    def fail(self, field: str, problem: str, fix: str):
        raise SpecError(self.path, field, problem, fix)

    def get(self, table: dict, key: str, typ, field: str, *, default=..., fix: str = ""):
        if key not in table:
            if default is ...:
                misplaced = [t for t, v in self.raw.items() if isinstance(v, dict) and key in v and table is self.raw]
                if misplaced:
                    fix = (f"move `{key}` above the first [table] header: TOML files it under "
                           f"[{misplaced[0]}] where it is now")
                self.fail(field, "is required but missing", fix or f"add `{key} = ...`")
            return default
        value = table[key]
        ok = isinstance(value, typ) and not (typ in (int, float, (int, float)) and isinstance(value, bool))
        if not ok:
            names = typ.__name__ if isinstance(typ, type) else " or ".join(t.__name__ for t in typ)
            self.fail(field, f"must be {names}, got {type(value).__name__} {value!r}", fix or f"write `{key}` as a {names}")
        return value

    def strings(self, table: dict, key: str, field: str, *, default=..., idents=False) -> tuple[str, ...]:
        value = self.get(table, key, list, field, default=default)
        if value is None:
            return ()
        for i, item in enumerate(value):
            if not isinstance(item, str) or not item.strip():
                self.fail(f"{field}[{i}]", f"must be a non-empty string, got {item!r}", "use a list of strings")
            if idents and not _IDENT.match(item):
                self.fail(f"{field}[{i}]", f"{item!r} is not a Python identifier", "use the exact parameter name")
        return tuple(value)

    def unknown_fields(self) -> None:
        """A misspelt key (`time_limt`) would silently keep the default: name it and the field it may mean."""
        import difflib

        for table, known in FIELDS.items():
            values = self.raw if not table else self.raw.get(table)
            if not isinstance(values, dict):
                continue
            for key in values:
                if key in known:
                    continue
                where = f"{table}.{key}" if table else key
                close = difflib.get_close_matches(key, known, n=1)
                elsewhere = [t for t, names in FIELDS.items() if t != table and key in names]
                if elsewhere:
                    fix = (f"`{key}` belongs under [{elsewhere[0]}]" if elsewhere[0] else
                           f"move `{key}` above the first [table] header: TOML files it under [{table}] where it "
                           "is now")
                elif close:
                    fix = f"did you mean `{close[0]}`?"
                else:
                    fix = f"remove it; the fields{' of [' + table + ']' if table else ''} are: {', '.join(known)}"
                self.fail(where, "is not a field torchcode knows", fix)

    def spec(self) -> ProblemSpec:
        raw = self.raw
        self.unknown_fields()
        fmt = self.get(raw, "format", int, "format", fix="add `format = 1` at the top")
        if fmt not in FORMAT_VERSIONS:
            self.fail("format", f"version {fmt} is not supported (this torchcode reads {list(FORMAT_VERSIONS)})",
                      "upgrade torchcode or write the problem in a supported format")
        pid = self.get(raw, "id", str, "id")
        if not _ID.match(pid):
            self.fail("id", f"{pid!r} is not a valid id", "use lower-case letters, digits and underscores, starting with a letter")
        if pid != self.folder.name:
            self.fail("id", f"{pid!r} differs from the folder name {self.folder.name!r}", "rename the folder or the id so they match")
        difficulty = self.get(raw, "difficulty", str, "difficulty").lower()
        if difficulty not in DIFFICULTIES:
            self.fail("difficulty", f"{difficulty!r} is not one of {', '.join(DIFFICULTIES)}", "pick one of those")
        hints = self.strings(raw, "hints", "hints")
        if not hints:
            self.fail("hints", "is empty", "give at least one hint, ordered from a nudge to nearly the answer")

        entry_raw = self.get(raw, "entry", dict, "entry", fix="add an [entry] table")
        kind = self.get(entry_raw, "kind", str, "entry.kind")
        if kind not in ("function", "module"):
            self.fail("entry.kind", f"{kind!r} is neither 'function' nor 'module'", "set kind = \"function\" or \"module\"")
        name = self.get(entry_raw, "name", str, "entry.name")
        if not _IDENT.match(name):
            self.fail("entry.name", f"{name!r} is not a Python identifier", "use the exact function or class name")
        params = self.strings(entry_raw, "params", "entry.params", idents=True)
        init = self.strings(entry_raw, "init", "entry.init", default=[], idents=True)
        parameters = self.strings(entry_raw, "parameters", "entry.parameters", default=[])
        if kind == "module" and not init:
            self.fail("entry.init", "a module entry point needs its constructor parameters", "list them, e.g. init = [\"d_model\", \"num_heads\"]")
        if kind == "function" and (init or parameters):
            self.fail("entry.init", "only module entry points take init/parameters", "remove them or set kind = \"module\"")
        entry = EntryPoint(kind, name, params, init, parameters)

        rules = self.get(raw, "rules", dict, "rules", default={})
        allowed = set(self.strings(rules, "allowed", "rules.allowed", default=[]))
        unknown = allowed - set(ALWAYS_FORBIDDEN)
        if unknown:
            self.fail("rules.allowed", f"{sorted(unknown)} are not forbidden by default", f"only these can be allowed: {', '.join(ALWAYS_FORBIDDEN)}")
        extra_forbidden = self.strings(rules, "forbidden", "rules.forbidden", default=[])
        forbidden = tuple(f for f in ALWAYS_FORBIDDEN if f not in allowed) + tuple(
            f for f in extra_forbidden if f not in ALWAYS_FORBIDDEN)

        g = self.get(raw, "grading", dict, "grading", default={})
        policy = GradingPolicy(
            time_limit=float(self.get(g, "time_limit", (int, float), "grading.time_limit", default=GradingPolicy.time_limit)),
            factor=float(self.get(g, "factor", (int, float), "grading.factor", default=GradingPolicy.factor)),
            floor=float(self.get(g, "floor", (int, float), "grading.floor", default=GradingPolicy.floor)),
        )
        dtypes = self.strings(g, "dtypes", "grading.dtypes", default=["float32"])
        bad = [d for d in dtypes if d not in DTYPES]
        if bad or not dtypes or dtypes[0] != "float32":
            self.fail("grading.dtypes", f"{list(dtypes)} is not a list of {', '.join(DTYPES)} starting with float32",
                      'e.g. dtypes = ["float32", "bfloat16", "float16"]')
        policy = GradingPolicy(policy.time_limit, policy.factor, policy.floor, tuple(dtypes))
        if policy.time_limit <= 0 or policy.factor < 1 or not (0 < policy.floor < 1):
            self.fail("grading", f"out of range: {policy}", "time_limit > 0, factor >= 1, 0 < floor < 1")

        b = self.get(raw, "bench", dict, "bench", default={})
        bench_sizes = {}
        for dev in ("cpu", "cuda"):
            sizes = self.get(b, dev, list, f"bench.{dev}", default=[])
            if any(not isinstance(x, int) or isinstance(x, bool) or x < 1 for x in sizes):
                self.fail(f"bench.{dev}", f"{sizes!r} is not a list of positive integers", "e.g. cpu = [256, 512, 1024]")
            bench_sizes[dev] = tuple(sizes)

        return ProblemSpec(
            bench_sizes=bench_sizes,
            id=pid,
            title=self.get(raw, "title", str, "title"),
            difficulty=difficulty,
            order=self.get(raw, "order", int, "order", default=1000),
            topic=self.get(raw, "topic", str, "topic", default="Other"),
            tags=self.strings(raw, "tags", "tags", default=[]),
            summary=self.get(raw, "summary", str, "summary", default=""),
            entry=entry,
            hints=hints,
            forbidden=forbidden,
            grading=policy,
            folder=self.folder,
            pack=self.pack,
            format=fmt,
        )

"""`validate`: prove a problem is sound before learners see it.

For each problem, in order (a failed step does not stop the others unless they need it):
  1. spec      the problem.toml parses, has every field, and its format version is supported
  2. files     the statement renders, hints are non-empty, the stub renders with the exact
               entry point and a TODO marker
  3. stub      the stub, graded, is "not implemented"
  4. reference the reference is accepted on several seeds (the first in every declared dtype, as a GPU
               grades), and the cases are deterministic
  5. variants  every known-wrong submission declares its verdict and is rejected with it (one that float32
               accepts is graded again in every declared dtype, as a GPU grades), every correct
               alternative accepted (the first seed in every declared dtype); at least one of each exists
  6. budget    every hidden case runs within half its time limit on the reference
Returns plain data; rendering is elsewhere.
"""

from __future__ import annotations

import ast
import io
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from torchcode.catalog import Catalog, ProblemSpec
from torchcode.errors import SpecError
from torchcode.grader.result import Verdict

EXPECT = re.compile(r"^#\s*expect:\s*(\w+)", re.M)
VERDICTS = tuple(v.value for v in Verdict if v is not Verdict.NOT_RUN)
_LOW = re.compile(r"\[(bfloat16|float16)\]$")  # a case's name as graded in low precision: "huge [float16]"
_LOW_FIX = ("the case is ill-conditioned in that dtype (an overflow past float16's 65504, or values rounding cannot "
            "keep), so a GPU rejects every learner on it: use smaller values, grad=False for huge logits, or run it "
            "only where it holds with @case(dtypes=(\"float32\", ...))")


@dataclass
class Item:
    check: str  # spec, files, stub, reference, variants, budget
    ok: bool
    what: str  # one line: what was checked or what failed
    file: str = ""
    fix: str = ""


@dataclass
class ProblemValidation:
    problem: str
    items: list[Item] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(i.ok for i in self.items)

    def add(self, check: str, ok: bool, what: str, file: Path | str = "", fix: str = "") -> bool:
        self.items.append(Item(check, ok, what, str(file), fix))
        return ok


def expected_verdict(path: Path) -> str | None:
    m = EXPECT.search(path.read_text(encoding="utf-8", errors="replace"))
    return m.group(1) if m else None


def _as_verdict(word: str | None) -> str | None:
    """A verdict as `# expect:` names it: its value (bad_interface) or the label check prints (Wrong interface ->
    wrong_interface)."""
    if word is None or word in VERDICTS:
        return word
    from torchcode.render import VERDICT_STYLE

    labels = {label.lower().replace(" ", "_"): value for value, (_, label) in VERDICT_STYLE.items()}
    return labels.get(word.lower(), word)


def stub_interface_problem(source: str, spec: ProblemSpec) -> str | None:
    """Does the rendered stub define the entry point with the exact signature? (read, not run)"""
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        return f"the stub is not valid Python (line {e.lineno}: {e.msg})"
    e = spec.entry
    nodes = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    node = nodes.get(e.name)
    if node is None:
        return f"the stub does not define `{e.name}`"

    def params(fn: ast.FunctionDef, skip_self: bool) -> list[str]:
        names = [a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs]
        return names[1:] if skip_self else names

    if e.is_module:
        if not isinstance(node, ast.ClassDef):
            return f"`{e.name}` should be a class in the stub"
        methods = {n.name: n for n in node.body if isinstance(n, ast.FunctionDef)}
        for meth, want in (("__init__", list(e.init)), ("forward", list(e.params))):
            if meth not in methods:
                return f"the stub's class has no {meth}"
            if params(methods[meth], True) != want:
                return f"{e.name}.{meth} takes ({', '.join(params(methods[meth], True))}), the spec says ({', '.join(want)})"
        return None
    if not isinstance(node, ast.FunctionDef):
        return f"`{e.name}` should be a function in the stub"
    if params(node, False) != list(e.params):
        return f"{e.name} takes ({', '.join(params(node, False))}), the spec says ({', '.join(e.params)})"
    return None


def validate_problem(spec: ProblemSpec, grader, seeds: tuple[int, ...] = (0, 1, 2),
                     variants: bool = True) -> ProblemValidation:
    v = ProblemValidation(spec.id)
    try:
        _validate(v, spec, grader, seeds, variants)
    except SpecError as e:  # the reference or the cases broke while grading
        _failed(v, "reference", e, "fix the file named above")
    return v


def _failed(v: ProblemValidation, check: str, e: SpecError, fix: str) -> None:
    """A SpecError as one item: what is wrong (with its field), the file, and the error's own fix when it has one."""
    what = (f"field '{e.field}': " if e.field else "") + e.problem
    own = e.fix.replace(" (run `torchcode validate` on the problem)", "")  # said for `check`; this is validate
    v.add(check, False, what, e.path, own or fix)


def _validate(v: ProblemValidation, spec: ProblemSpec, grader, seeds: tuple[int, ...], variants: bool) -> None:
    from rich.console import Console
    from rich.markdown import Markdown

    from torchcode.scaffold import render_stub

    v.add("spec", True, f"problem.toml parses (format {spec.format})", spec.folder / "problem.toml")

    # 2. statement, hints, stub
    try:
        text = spec.statement()
        Console(file=io.StringIO(), width=100).print(Markdown(text))
        v.add("files", bool(text.strip()), "statement.md renders" if text.strip() else "statement.md is empty",
              spec.statement_path, "" if text.strip() else "write the statement")
    except SpecError as e:
        _failed(v, "files", e, "add statement.md")
    empty = [i + 1 for i, h in enumerate(spec.hints) if not h.strip()]
    v.add("files", not empty, f"{len(spec.hints)} hints, none empty" if not empty else f"hints {empty} are empty",
          spec.folder / "problem.toml", "" if not empty else "write every hint")
    stub_text = None
    try:
        stub_text = render_stub(spec)
    except SpecError as e:
        if Path(e.path) != spec.statement_path:  # a missing statement is said once, above
            _failed(v, "files", e, "fix the template")
    if stub_text is not None:
        problem = stub_interface_problem(stub_text, spec)
        v.add("files", problem is None, problem or f"stub defines {spec.entry.signature()}", spec.template_path,
              "make the template's signature match [entry] in problem.toml" if problem else "")
        has_todo = "TODO" in stub_text
        v.add("files", has_todo, "stub has a TODO marker" if has_todo else "stub has no TODO marker",
              spec.template_path, "" if has_todo else "tell the learner what to write with # TODO comments")

    # cases and reference must load before anything can be graded
    try:
        problem = grader.problem(spec)
    except SpecError as e:
        _failed(v, "reference", e, "fix the file named above")
        return

    # 3. the stub is not implemented
    if stub_text is not None:
        with tempfile.TemporaryDirectory() as d:
            stub_file = Path(d) / f"{spec.id}.py"
            stub_file.write_text(stub_text)
            r = grader.grade(spec, stub_file, seed=seeds[0])
        v.add("stub", r.verdict.value == "not_implemented",
              f"stub graded: {r.verdict.value}" + ("" if r.verdict.value == "not_implemented" or not r.message
                                                  else f" ({r.message[:160]})"),
              spec.template_path, "" if r.verdict.value == "not_implemented" else
              "the stub must raise NotImplementedError in every entry method, and must not already pass")

    # 4. the reference passes on several seeds (the first in every declared dtype, as a GPU grades: a case that
    # overflows float16 rejects every learner there); cases are deterministic given a seed
    every_dtype = list(spec.grading.dtypes)
    low = [d for d in every_dtype if d != "float32"]
    ref_reports = []
    for seed in seeds:
        dtypes = every_dtype if variants and low and seed == seeds[0] else None
        r = grader.grade(spec, spec.solution_path, seed=seed, gpu_dry_run=seed == seeds[0], dtypes=dtypes)
        ref_reports.append(r)
        failed = r.explained.name if r.explained else "?"
        if not v.add("reference", r.passed, f"reference on seed {seed}" + (f" ({', '.join(dtypes)})" if dtypes else "")
                     + f": {r.verdict.value}" + ("" if r.passed else f" in case {failed}: {r.message[:200]}"),
                     spec.solution_path, "" if r.passed else _LOW_FIX if _LOW.search(failed) else
                     "fix the reference or the case that it fails"):
            break
    if low and not variants:
        v.add("reference", True, f"reference in {', '.join(low)}: not graded (--no-variants)", spec.solution_path)
    gpu = next((a for r in ref_reports for a in r.advice), "")  # accepted on the CPU; a dry run for a GPU said this
    v.add("reference", not gpu, "the reference would also run on a GPU (a dry run on the meta device)" if not gpu
          else f"the reference would fail on a GPU: {gpu}", spec.solution_path,
          "" if not gpu else "make every tensor on the inputs' device")
    same = all(_case_bytes(problem, d, seeds[0]) == _case_bytes(problem, d, seeds[0]) for d in problem.cases)
    v.add("reference", same, "cases are deterministic for a given seed" if same else
          "a case builds different inputs from the same seed", spec.cases_path,
          "" if same else "draw every random value from the rng argument, never from torch's global generator")

    # 5. mutation check
    wrong, right = spec.variants("wrong"), spec.variants("right")
    if not variants:
        v.add("variants", True, f"not graded (--no-variants): {len(wrong)} known-wrong, {len(right)} correct", spec.folder)
        wrong, right = [], []
    else:
        _variants_present(v, spec, wrong, right)
    for path in wrong:
        want = _as_verdict(expected_verdict(path))
        if want not in VERDICTS:  # without it, any rejection passed: a mutant rejected for a typo proved nothing
            v.add("variants", False, f"{path.name} has no '# expect: VERDICT' line" if want is None else
                  f"{path.name} declares '# expect: {want}', which is not a verdict", path,
                  f"start it with the verdict its mistake should get, e.g. '# expect: wrong_answer' "
                  f"(verdicts: {', '.join(x for x in VERDICTS if x != 'accepted')})")
            continue
        r = grader.grade(spec, path, seed=seeds[0])
        if r.passed and list(r.dtypes) != every_dtype:
            # a mistake only half precision shows (an overflow, a float32 result): graded as a GPU grades by default
            r = grader.grade(spec, path, seed=seeds[0], dtypes=every_dtype)
        if r.passed:
            v.add("variants", False, f"mutant survived: {path.name} was accepted", path,
                  "add a hidden case that catches this mistake")
        elif want and r.verdict.value != want:
            v.add("variants", False, f"{path.name} was rejected as {r.verdict.value}, declared {want}: {r.message[:160]}",
                  path, "fix the '# expect:' line or the cases")
        else:
            v.add("variants", True, f"{path.name} rejected: {r.verdict.value}", path)
    for path in right:
        rejected, gpu = None, ""
        for seed in seeds:  # the first seed in every declared dtype, as for the reference
            r = grader.grade(spec, path, seed=seed, gpu_dry_run=seed == seeds[0],
                             dtypes=every_dtype if low and seed == seeds[0] else None)
            gpu = gpu or next(iter(r.advice), "")
            if not r.passed:
                rejected = r
                break
        v.add("variants", rejected is None, f"{path.name} accepted on {len(seeds)} seeds" if rejected is None
              else f"{path.name} was rejected: {_why(rejected)}",
              path, "" if rejected is None else "a correct alternative fails: loosen a case that is too strict, fix "
              f"the reference ({spec.solution_path.parent.name}/{spec.solution_path.name}) if it is the one that is "
              f"wrong, or fix the alternative (reproduce: `torchcode check {path} --problem {spec.id} "
              f"--seed {rejected.seed}{_dtype_option(rejected)}{_pack_option(spec)}`)")
        if gpu:
            v.add("variants", False, f"{path.name} would fail on a GPU: {gpu}", path,
                  "a correct alternative must run on any device: make every tensor on the inputs' device")

    # benchmark: declared sizes need a builder that runs on the reference
    if any(spec.bench_sizes.values()):
        ok = problem.bench_builder is not None
        v.add("bench", ok, "@benchmark builder present" if ok else "[bench] sizes are declared but cases.py has no "
              "@benchmark builder", spec.cases_path, "" if ok else "add @benchmark def build(rng, size) -> Case")
        if ok:
            from torchcode.grader.cases import Rng

            smallest = min(x for sizes in spec.bench_sizes.values() for x in sizes)
            try:
                c = problem.bench_builder(Rng(0), smallest)
                one = len(c.steps) == 1
            except Exception as e:  # noqa: BLE001 - an author error, reported
                one, c = False, None
                v.add("bench", False, f"the @benchmark builder failed: {type(e).__name__}: {e}", spec.cases_path,
                      "fix the builder")
            if c is not None:
                v.add("bench", one, f"benchmark builds one call at size {smallest}" if one else
                      "the @benchmark builder must return a Case with exactly one Call", spec.cases_path)

    # 6. time budget
    slow = [(c.name, c.seconds) for r in ref_reports for c in r.cases if c.seconds > spec.grading.time_limit / 2]
    v.add("budget", not slow, f"every case within half its {spec.grading.time_limit:g} s limit" if not slow else
          f"cases too slow on the reference: {', '.join(f'{n} ({s:.2f} s)' for n, s in slow)}", spec.cases_path,
          "" if not slow else "shrink the case or raise [grading] time_limit")


def _variants_present(v: ProblemValidation, spec: ProblemSpec, wrong: list, right: list) -> None:
    v.add("variants", bool(wrong), f"{len(wrong)} known-wrong submissions" if wrong else "no known-wrong submission",
          spec.folder / "wrong", "" if wrong else "add realistic mistakes under wrong/, each with '# expect: VERDICT'")
    v.add("variants", bool(right), f"{len(right)} correct alternatives" if right else "no correct alternative",
          spec.folder / "right", "" if right else "add a correct alternative under right/ ('# expect: accepted')")


def _case_bytes(problem, cdef, seed: int) -> bytes:
    prep = problem.build(cdef, seed)  # built anew each time (prepare would hand back the same one)
    return repr(prep.header).encode() + b"".join(prep.message.blobs)


def validate(catalog: Catalog, ids: list[str], grader, seeds: tuple[int, ...] = (0, 1, 2),
             variants: bool = True) -> list[ProblemValidation]:
    results = []
    for pid in ids:
        if pid in catalog.broken:
            err = catalog.broken[pid]
            pv = ProblemValidation(pid)
            _failed(pv, "spec", err, "fix the field named above")
            results.append(pv)
            continue
        results.append(validate_problem(catalog.get(pid), grader, seeds, variants))
    return results


def _dtype_option(r) -> str:
    """`--dtype D` when the case that failed ran in low precision (the CPU grades float32 alone by default)."""
    case = r.explained or r.first_failure
    m = _LOW.search(case.name) if case else None
    return f" --dtype {m.group(1)}" if m else ""


def _pack_option(spec: ProblemSpec) -> str:
    from torchcode.paths import builtin_pack

    return "" if spec.pack.resolve() == builtin_pack().resolve() else f" --problems-dir {spec.pack}"


def _why(r) -> str:
    """Which case rejected a report, with which verdict and message (the first line of it)."""
    case = r.explained or r.first_failure
    message = (case.message if case and case.message else r.message).strip().splitlines()
    where = f"case '{case.name}'" if case else "before any case ran"
    return f"{where}, verdict {r.verdict.value if not case else case.verdict.value} on seed {r.seed}" + (
        f": {message[0][:160]}" if message else "")

"""Grade every reference and right/ variant (and, with --wrong, every wrong/ variant) on many seeds in every
declared dtype, in one process with one Grader: a correct submission must never be rejected by chance.

    nice -n 10 python benchmarks/seed_sweep.py --seeds 10 [--start 0] [--problems sdpa,gqa] [--wrong]
                                                [--dtypes float32,bfloat16,float16] [--only CASE,..] [--out sweep.jsonl]

Seeds are drawn from --start (a seed sequence, not random: a run can be resumed or repeated). Loops seed-outer,
variant-inner per problem, so the variants of one problem on one seed share the built cases. Prints, and appends to
--out as JSON lines, every correct file rejected (problem, variant, seed, case, dtype, replay, message) and every
wrong/ file that got another verdict than its `# expect:` line; with --wrong also which cases caught each wrong one.
Exit status 1 if any correct file was rejected or any wrong one passed (or got another verdict).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def seeds_from(start: int, n: int) -> list[int]:
    rng = random.Random(start)
    return [rng.randrange(2**31) for _ in range(n)]


def expected(path: Path) -> str:
    m = re.search(r"^# expect: (\w+)", path.read_text(), re.M)
    return m.group(1) if m else "accepted"


class Margins:
    """How close each correct file came to being rejected: per (problem, case, dtype, tensor), the largest
    max|got - gold| / allowed over the files and seeds swept, and the same for the low-precision lean rule
    (|lean| / its threshold, where the rule applies). 1.0 is a reject; above ~0.5 a few more seeds may reach it."""

    def __init__(self):
        from torchcode.grader import compare, verdict

        self.file = None  # (problem, variant, seed) of the correct file being graded; None: not recorded
        self.case = None
        self.tol: dict = {}
        self.lean: dict = {}
        judge_case, original = verdict.judge_case, compare.compare

        def judged(pol, p, *a, **k):
            self.case = (p.case.name, str(p.header.get("dtype")), p.replay)
            return judge_case(pol, p, *a, **k)

        def compared(what, got, gold, ref, **k):
            if self.file and self.case:
                try:
                    self.measure(what, got, gold, ref, **k)
                except Exception as e:  # noqa: BLE001 - a measuring tool must not change the grade
                    print("# margin not measured:", type(e).__name__, e, file=sys.stderr)
            return original(what, got, gold, ref, **k)

        verdict.judge_case, compare.compare = judged, compared

    def measure(self, what, got, gold, ref, *, factor, floor, ignore=None, spread=None, dims=(), scale=None):
        import torch

        from torchcode.grader import compare as c

        got64, gold64, ref64 = got.detach().double(), gold.detach().double(), ref.detach().double()
        if not gold64.numel() or got64.shape != gold64.shape:
            return
        keep = torch.isfinite(gold64) & (torch.ones_like(gold64, dtype=torch.bool) if ignore is None
                                         else ~ignore.to(torch.bool).expand_as(gold64))
        zero = torch.zeros((), dtype=torch.float64)
        own = torch.where(keep, gold64.abs(), zero).max().item()
        scale, tol_scale = own, max(own, scale or 0.0)  # as compare.compare: a vanishing gradient's floor scale
        sp = spread.detach().double() if spread is not None and spread.shape == gold64.shape else None
        ref_err = max(torch.where(keep & torch.isfinite(r - gold64), (r - gold64).abs(), zero).max().item()
                      for r in (ref64, sp) if r is not None)
        if ref.is_floating_point():
            floor = max(floor, c.ROUNDINGS * torch.finfo(ref.dtype).eps)
        allowed = factor * ref_err + floor * tol_scale + c.atol_for(ref.dtype)
        diff = torch.where(keep, (got64 - gold64).abs(), zero)
        diff = torch.where(torch.isfinite(got64) | ~keep, diff, torch.full_like(diff, float("inf")))
        key = (self.file[0], self.case[0], self.case[1], what)
        where = {"variant": self.file[1], "seed": self.file[2], "replay": self.case[2], "scale": scale,
                 "ref_err": ref_err, "allowed": allowed}
        ratio = diff.max().item() / allowed
        if ratio > self.tol.get(key, (-1.0,))[0]:
            self.tol[key] = (ratio, where)
        if ref.dtype not in c.LOW_PRECISION or int((keep & torch.isfinite(got64)).sum()) < c.BIAS_MIN_ELEMENTS:
            return
        keep = keep & torch.isfinite(got64)
        eps = torch.finfo(ref.dtype).eps
        refs = [r for r in (ref64, sp) if r is not None]
        if any(torch.where(keep, (r - gold64).abs(), zero).max().item() > c.BIAS_CONDITIONED * eps * scale
               for r in refs):
            return  # the rule does not apply here
        dims = [d for d in range(gold64.dim()) if gold64.shape[d] > 1]
        pairs = [(a, b) for i, a in enumerate(dims) for b in dims[i + 1:]]
        mine = c._leans(c._sums(got64 - gold64, gold64, keep), dims, pairs)  # whole, per slice, per block
        honest = [c._leans(c._sums(r - gold64, gold64, keep), dims, pairs) for r in refs]
        floors = c.lean_floors(eps, len(mine))
        worst = max(abs(mine[i][k]) / max(floors[i], c.BIAS_FACTOR * max(abs(h[i][k]) for h in honest))
                    for i in range(len(mine)) for k in range(2))
        if worst > self.lean.get(key, (-1.0,))[0]:
            self.lean[key] = (worst, where)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--start", type=int, default=0, help="the seed sequence to draw from")
    ap.add_argument("--seed", type=int, action="append", default=[], help="exactly this seed (repeatable)")
    ap.add_argument("--problems", default="", help="comma-separated problem ids (default: all)")
    ap.add_argument("--variants", default="", help="comma-separated file stems to keep (default: all)")
    ap.add_argument("--dtypes", default="", help="comma-separated dtypes (default: each problem's declared ones)")
    ap.add_argument("--only", default="", help="comma-separated case names to grade (default: every case)")
    ap.add_argument("--wrong", action="store_true", help="also grade the wrong/ variants")
    ap.add_argument("--no-right", action="store_true", help="skip the reference and right/ variants")
    ap.add_argument("--out", default="", help="append every record, as JSON lines, to this file")
    ap.add_argument("--margins", type=int, default=10, help="print the N closest calls of correct files (0: none)")
    args = ap.parse_args()

    from torchcode.catalog import load_catalog
    from torchcode.grader.judge import Grader

    grader = Grader()  # forks its zygote before this process computes anything
    margins = Margins() if args.margins else None
    catalog = load_catalog()
    wanted = set(filter(None, args.problems.split(",")))
    stems = set(filter(None, args.variants.split(",")))
    seeds = args.seed or seeds_from(args.start, args.seeds)
    out = open(args.out, "a") if args.out else None
    bad = 0
    grades = Counter()
    caught: dict = defaultdict(Counter)  # (problem, wrong variant) -> cases that rejected it
    t0 = time.perf_counter()
    try:
        for spec in catalog.ordered():
            if wanted and spec.id not in wanted:
                continue
            dtypes = args.dtypes.split(",") if args.dtypes else list(spec.grading.dtypes)
            dtypes = [d for d in dtypes if d in spec.grading.dtypes]
            files = [] if args.no_right else [spec.solution_path, *spec.variants("right")]
            files += spec.variants("wrong") if args.wrong else []
            files = [f for f in files if not stems or f.stem in stems]
            cases = grader.problem(spec).cases
            only = list(filter(None, args.only.split(","))) or None
            defs = [(d.name, dt) for dt in dtypes for d in cases  # the report's order
                    if d.runs_in(dt) and (not only or d.name in only)]
            tp = time.perf_counter()
            for seed in seeds:
                for path in files:
                    want = expected(path) if path.parent.name == "wrong" else "accepted"
                    kind = "reference" if path == spec.solution_path else path.parent.name
                    if margins:
                        margins.file = (spec.id, f"{kind}/{path.stem}", seed) if kind != "wrong" else None
                    report = grader.grade(spec, path, seed=seed, dtypes=dtypes, only=only)
                    grades[kind] += 1
                    failed = [(defs[i], c) for i, c in enumerate(report.cases)
                              if not c.passed and c.verdict.value != "not_run"]
                    if kind == "wrong":
                        for (name, dt), c in failed:
                            caught[(spec.id, path.stem)][f"{name}/{dt}/{c.verdict.value}"] += 1
                    if report.verdict.value == want:
                        continue
                    bad += 1
                    recs = [{"case": name, "dtype": dt, "verdict": c.verdict.value, "replay": c.replay,
                             "message": c.message[:400]} for (name, dt), c in failed] or [{"message": report.message}]
                    for r in recs:
                        rec = {"problem": spec.id, "variant": f"{kind}/{path.stem}", "seed": seed,
                               "expected": want, "got": report.verdict.value, **r}
                        print("REJECT" if want == "accepted" else "VERDICT", json.dumps(rec), flush=True)
                        if out:
                            out.write(json.dumps(rec) + "\n")
                            out.flush()
            print(f"# {spec.id}: {len(seeds)} seeds x {len(files)} files in {dtypes}: "
                  f"{time.perf_counter() - tp:.0f} s", flush=True)
        for (pid, stem), cnt in sorted(caught.items()):
            line = {"problem": pid, "wrong": stem, "caught_by": dict(cnt.most_common())}
            print("CAUGHT", json.dumps(line), flush=True)
            if out:
                out.write(json.dumps(line) + "\n")
        if margins:
            for kind, rows in (("tolerance", margins.tol), ("lean", margins.lean)):
                for key, (ratio, where) in sorted(rows.items(), key=lambda kv: -kv[1][0])[:args.margins]:
                    line = {"margin": kind, "ratio": round(ratio, 3), "problem": key[0], "case": key[1],
                            "dtype": key[2], "what": key[3], "worst_at": where}
                    print("MARGIN", json.dumps(line), flush=True)
                    if out:
                        out.write(json.dumps(line) + "\n")
    finally:
        grader.close()
        if out:
            out.close()
    print(f"# {dict(grades)} grades, {len(seeds)} seeds, {bad} unexpected, {time.perf_counter() - t0:.0f} s")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

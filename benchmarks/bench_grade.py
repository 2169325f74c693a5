"""Throughput of `torchcode grade`, as ratios measured in the same run.

    python benchmarks/bench_grade.py [--workers N] [--sizes 50,100,200,500] [--ray-size 200] [--check-runs 8]

A synthetic class cycles through the known-wrong and correct variants of sdpa, repeat_kv and
causal_attention (every kind of verdict, in the proportions the problems ship). Figures:

  one warm session     seconds per submission, graded one after another (the unit of work), also
                       pinned to one core (a session alone overlaps grades on a second core)
  local pool           submissions/s with N sessions; vs ideal = N / (one session's seconds per submission
                       on one core), and against the unpinned session
  vs check             the pool against one `torchcode check` process per submission
  Ray                  a local Ray cluster (N actors) against the local pool, same submissions
  growth               seconds per submission from the smallest to the largest class (linear: flat)

Targets (issue 13): pool >= 80% of ideal, >= 10x faster than check per submission; Ray >= 70% of the
local pool at 200 submissions; cost linear in the class size. Start-up (sessions importing torch,
a Ray cluster) is reported apart: it is paid once per run, not per submission.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROBLEMS = ("sdpa", "repeat_kv", "causal_attention")
SKIP = {"checkpointed.py"}  # imports torch._dynamo: seconds of one-time loading, not grading


def variants() -> list[tuple[str, Path]]:
    out = []
    for p in PROBLEMS:
        for kind in ("right", "wrong"):
            out += [(p, f) for f in sorted((ROOT / "problems" / p / kind).glob("*.py")) if f.name not in SKIP]
    return out


def make_class(folder: Path, n: int) -> list:
    """``n`` submissions cycling through the variants, ``len(PROBLEMS)`` files per student folder."""
    from torchcode.classroom.discover import discover

    by_problem = [[f for q, f in variants() if q == p] for p in PROBLEMS]
    for i in range(n):
        k = i % len(PROBLEMS)
        src = by_problem[k][(i // len(PROBLEMS)) % len(by_problem[k])]
        student = folder / f"student{i // len(PROBLEMS):04d}"
        student.mkdir(parents=True, exist_ok=True)
        shutil.copy(src, student / f"{PROBLEMS[k]}.py")
    return discover(folder, list(PROBLEMS), folder / ".unused").submissions


def timed_pool(pool, jobs, seed=1) -> tuple[float, list]:
    t = time.perf_counter()
    verdicts = [(o.submission.key, o.report["verdict"] if o.report else o.error)
                for o in pool.results(jobs, seed, {p: None for p in PROBLEMS})]
    return time.perf_counter() - t, sorted(verdicts)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--sizes", default="50,100,200,500")
    ap.add_argument("--ray-size", type=int, default=200)
    ap.add_argument("--single", type=int, default=50, help="submissions graded by one session for the unit cost")
    ap.add_argument("--check-runs", type=int, default=8)
    ap.add_argument("--no-ray", action="store_true")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    os.environ.setdefault("TORCHCODE_HOME", tempfile.mkdtemp(prefix="torchcode-bench-home-"))

    from torchcode.classroom.pool import LocalPool
    from torchcode.grader.limits import Limits

    if not args.no_ray:
        from torchcode.classroom.ray_pool import RayPool

    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; "
          f"python {platform.python_version()}; workers {args.workers}")
    with tempfile.TemporaryDirectory(prefix="torchcode-bench-grade-") as d:
        d = Path(d)
        jobs = make_class(d / "class", max(sizes + [args.ray_size, args.single]))

        # one warm session, one submission after another: the unit of work. A session overlaps the next
        # grade's case building with the current grade, so unpinned it uses more than one core; pinned to
        # one core (its processes inherit the affinity) it is the work one pool worker does per core.
        def one_session(cores) -> tuple[float, float]:
            everything = os.sched_getaffinity(0)
            os.sched_setaffinity(0, cores or everything)
            try:
                one = LocalPool(1, None, Limits(device="cpu"), "cpu", list(PROBLEMS))
                t = time.perf_counter()
                one.start()
            finally:
                os.sched_setaffinity(0, everything)
            start = time.perf_counter() - t
            timed_pool(one, jobs[:6])  # warm-up: first grades of each problem
            secs, _ = timed_pool(one, jobs[:args.single])
            one.close()
            return secs / args.single, start

        free_per_sub, start_one = one_session(None)
        per_sub, _ = one_session({min(os.sched_getaffinity(0))})
        print(f"one warm session: {free_per_sub * 1e3:.0f} ms per submission ({args.single} submissions), "
              f"start {start_one:.1f} s; pinned to one core: {per_sub * 1e3:.0f} ms")

        # the local pool, at every size
        pool = LocalPool(args.workers, None, Limits(device="cpu"), "cpu", list(PROBLEMS))
        t = time.perf_counter()
        pool.start()
        start_pool = time.perf_counter() - t
        timed_pool(pool, jobs[:6])  # warm-up
        results = {}
        for n in sizes:
            results[n], _ = timed_pool(pool, jobs[:n])
        ideal = args.workers / per_sub
        for n in sizes:
            rate = n / results[n]
            print(f"local pool, {n:4d} submissions: {results[n]:6.1f} s, {rate:5.2f} submissions/s, "
                  f"{results[n] / n * 1e3:4.0f} ms each; {rate / ideal:.0%} of ideal ({ideal:.2f}/s; "
                  f"{rate * free_per_sub / args.workers:.0%} against the unpinned session)")
        print(f"local pool start: {start_pool:.1f} s for {args.workers} sessions (once per run)")
        growth = (results[sizes[-1]] / sizes[-1]) / (results[sizes[0]] / sizes[0])
        print(f"growth: seconds per submission at {sizes[-1]} / at {sizes[0]} = {growth:.2f} (1.00 = linear)")

        # one `torchcode check` process per submission
        t = time.perf_counter()
        for job in jobs[:args.check_runs]:
            subprocess.run([sys.executable, "-m", "torchcode", "check", str(job.path), "--problem", job.problem,
                            "--device", "cpu", "--seed", "1"], cwd=d, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, check=False)
        check_each = (time.perf_counter() - t) / args.check_runs
        best_rate = max(n / results[n] for n in sizes)
        print(f"torchcode check per submission: {check_each * 1e3:.0f} ms; the pool is "
              f"{best_rate * check_each:.1f}x faster per submission")

        if args.no_ray:
            pool.close()
            return
        # Ray against the local pool on the same submissions, alternated (the machine's load drifts): best of 2
        rp = RayPool(args.workers, None, None, Limits(device="cpu"), "cpu", list(PROBLEMS))
        t = time.perf_counter()
        rp.start()
        start_ray = time.perf_counter() - t
        try:
            timed_pool(rp, jobs[:6])
            local_t, ray_t, same = [], [], True
            for _ in range(2):
                secs, lv = timed_pool(pool, jobs[:args.ray_size])
                local_t.append(secs)
                secs, rv = timed_pool(rp, jobs[:args.ray_size])
                ray_t.append(secs)
                same = same and lv == rv
        finally:
            rp.close()
            pool.close()
        local_rate, ray_rate = args.ray_size / min(local_t), args.ray_size / min(ray_t)
        print(f"Ray, {args.ray_size} submissions: {min(ray_t):.1f} s, {ray_rate:.2f} submissions/s; local pool "
              f"{min(local_t):.1f} s, {local_rate:.2f}/s; Ray = {ray_rate / local_rate:.0%} of the local pool "
              f"({'same verdicts' if same else 'VERDICTS DIFFER'}); Ray cluster + actors start {start_ray:.1f} s")


if __name__ == "__main__":
    sys.exit(main())

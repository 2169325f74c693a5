"""What `check` costs on a GPU, as a ratio against `import torch` + CUDA initialisation measured in the same run.

    python benchmarks/bench_gpu.py [--runs 3] [--problems gqa,sdpa] [--profile gqa,minimind_attention]

Target (issue "GPU grading"): `torchcode check PROBLEM` of each problem's reference, on CUDA in every
declared dtype, costs at most 1.5x `python -c "import torch; torch.cuda.init(); torch.zeros(1, device='cuda')"`.
--profile adds, for the problems named, where a check's time goes (one in-process check with timers).
Without CUDA it says so and exits 0.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET = 1.5
CUDA_INIT = "import torch; torch.cuda.init(); torch.zeros(1, device='cuda'); torch.cuda.synchronize()"


def wall(cmd: list[str], cwd: str, env: dict, runs: int) -> tuple[float, int]:
    times, code = [], 0
    for _ in range(runs):
        t = time.perf_counter()
        code = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
        times.append(time.perf_counter() - t)
    return statistics.median(times), code


PROFILE = """
import collections, json, sys, time
from torchcode.catalog import load_catalog
from torchcode.grader import problem as P, sandbox as S
from torchcode.grader.judge import Grader, Limits

spent = collections.defaultdict(float)

def timed(cls, name, key):
    inner = getattr(cls, name)
    def wrapper(*a, **k):
        t = time.perf_counter()
        try:
            return inner(*a, **k)
        finally:
            spent[key(a, k) if callable(key) else key] += time.perf_counter() - t
    setattr(cls, name, wrapper)

timed(P.Problem, "__init__", "trusted: load cases and reference")
timed(P.Problem, "prepare", lambda a, k: f"trusted: prepare {a[3] if len(a) > 3 else k.get('dtype', 'float32')}")
timed(P.Problem, "judge", "trusted: judge")
timed(S.WorkerProcess, "receive", "waiting for the worker")
timed(S.Zygote, "spawn", "spawn")
t0 = time.perf_counter()
with Grader(Limits(device="cuda")) as g:
    spent["trusted: zygote"] = time.perf_counter() - t0
    spec = load_catalog().get(sys.argv[1])
    r = g.grade(spec, spec.solution_path, seed=1)
spent["total"] = time.perf_counter() - t0
spent["worker: load (reported)"] = r.load_seconds
spent["worker: cases (reported)"] = sum(c.seconds for c in r.cases)
print(json.dumps({"verdict": r.verdict.value, "spent": spent}))
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--problems", default="", help="comma-separated ids (default: all)")
    ap.add_argument("--profile", default="", help="comma-separated ids (or all): show where their check's time goes")
    args = ap.parse_args()
    import torch

    if not torch.cuda.is_available():
        print(f"bench_gpu: needs a CUDA GPU; torch {torch.__version__} sees none here. Nothing measured.")
        return
    from torchcode.catalog import load_catalog

    cat = load_catalog()
    ids = [p for p in args.problems.split(",") if p] or [s.id for s in cat.ordered()]
    py = sys.executable
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, TORCHCODE_HOME=str(Path(d) / "home"))
        base, _ = wall([py, "-c", CUDA_INIT], d, env, max(args.runs, 3))
        torch_only, _ = wall([py, "-c", "import torch"], d, env, max(args.runs, 3))
        print(f"machine: {torch.cuda.get_device_name(0)}, {os.cpu_count()} cpus, python {platform.python_version()}, "
              f"torch {torch.__version__}")
        print(f"runs: median of {args.runs} (baselines: of {max(args.runs, 3)})")
        print(f"{'import torch':<32} {torch_only:7.3f}s")
        print(f"{'import torch + CUDA init':<32} {base:7.3f}s  (the baseline)")
        worst = 0.0
        for pid in ids:
            spec = cat.get(pid)
            shutil.copy(spec.solution_path, Path(d) / f"{pid}.py")
            t, code = wall([py, "-m", "torchcode", "check", pid, "--seed", "1", "--device", "cuda"], d, env, args.runs)
            worst = max(worst, t / base)
            flag = "ok" if t / base <= TARGET and code == 0 else ("REJECTED" if code else "OVER TARGET")
            print(f"{'check ' + pid + ' (' + str(len(spec.grading.dtypes)) + ' dtypes)':<32} {t:7.3f}s  = "
                  f"{t / base:5.2f}x baseline  target <= {TARGET}x  {flag}")
            if args.profile in ("all", pid) or pid in args.profile.split(","):
                out = subprocess.run([py, "-c", PROFILE, pid], cwd=d, env=env, capture_output=True, text=True)
                if out.returncode:
                    print("    profile failed:", out.stderr[-800:])
                    continue
                prof = json.loads(out.stdout.strip().splitlines()[-1])
                for key, sec in sorted(prof["spent"].items(), key=lambda kv: -kv[1]):
                    print(f"    {key:<40} {sec:7.3f}s")
        print(f"worst: {worst:.2f}x  target <= {TARGET}x  {'ok' if worst <= TARGET else 'OVER TARGET'}")


if __name__ == "__main__":
    main()

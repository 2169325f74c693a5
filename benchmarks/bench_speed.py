"""Speed of the CLI and the grader, as ratios against baselines measured in the same run.

    python benchmarks/bench_speed.py [--runs 7]

Targets (issue "Hardening and speed"):
  check gqa (a correct solution)  <= 1.3x  python -c "import torch"
  list, start sdpa                <= 2.0x  python -c "import typer, rich"
  grading N submissions in one Grader costs one torch import + N x (cases), not N imports

Each figure is the median of --runs runs; the output is one stable line per figure.
"""

from __future__ import annotations

import argparse
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


def wall(cmd: list[str], cwd: str, env: dict, runs: int) -> float:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


LIBRARY = """
import sys, time
t0 = time.perf_counter()
from torchcode.catalog import load_catalog
from torchcode.grader.judge import Grader
spec = load_catalog().get("gqa")
with Grader() as g:
    t1 = time.perf_counter()
    for _ in range(int(sys.argv[1])):
        assert g.grade(spec, spec.solution_path, seed=1).passed
    t2 = time.perf_counter()
print(t2 - t0, t1 - t0, t2 - t1)
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--submissions", type=int, default=20)
    args = ap.parse_args()
    py = sys.executable
    tc = [py, "-m", "torchcode"]
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, TORCHCODE_HOME=str(Path(d) / "home"))
        shutil.copy(ROOT / "solutions" / "gqa.py", Path(d) / "gqa.py")
        rows = []
        torch_import = wall([py, "-c", "import torch"], d, env, args.runs)
        check = wall(tc + ["check", "gqa", "--seed", "1"], d, env, args.runs)
        rows.append(("check gqa (accepted)", check, "import torch", torch_import, 1.3))
        cli_import = wall([py, "-c", "import typer, rich"], d, env, args.runs)
        rows.append(("list", wall(tc + ["list"], d, env, args.runs), "import typer, rich", cli_import, 2.0))
        rows.append(("start sdpa --force", wall(tc + ["start", "sdpa", "--force"], d, env, args.runs),
                     "import typer, rich", cli_import, 2.0))
        one = [float(x) for x in subprocess.run([py, "-c", LIBRARY, "1"], cwd=d, env=env, capture_output=True,
                                                 text=True, check=True).stdout.split()]
        many = [float(x) for x in subprocess.run([py, "-c", LIBRARY, str(args.submissions)], cwd=d, env=env,
                                                  capture_output=True, text=True, check=True).stdout.split()]
        per = many[2] / args.submissions
    print(f"machine: {platform.machine()}, {os.cpu_count()} cpus, python {platform.python_version()}, "
          f"{platform.system()} {platform.release()}")
    print(f"runs: median of {args.runs}")
    for name, t, base_name, base, target in rows:
        verdict = "ok" if t / base <= target else "OVER TARGET"
        print(f"{name:<24} {t:7.3f}s  = {t / base:5.2f}x {base_name:<20} ({base:.3f}s)  target <= {target}x  {verdict}")
    print(f"{'library: setup':<24} {many[1]:7.3f}s  = {many[1] / torch_import:5.2f}x import torch  (imports + zygote)")
    print(f"{'library: per submission':<24} {per:7.3f}s  = {per / torch_import:5.2f}x import torch  "
          f"({args.submissions} submissions of gqa, {one[2]:.3f}s for the first)")


if __name__ == "__main__":
    main()

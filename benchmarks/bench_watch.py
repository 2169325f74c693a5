"""From save to report through the real `torchcode watch`, file watcher included.

    python benchmarks/bench_watch.py [PROBLEM] [--rounds N]

Starts `torchcode watch FILE` (a subprocess, output to a file), then each round saves the file
(the reference solution with a new comment, as an editor would, a second after the last report)
and times until the new report's header is on watch's stdout. bench_session.py measures the
session alone; the difference is what watch adds (the watcher's quiet period, reading the event,
rendering). Progress goes to a temporary TORCHCODE_HOME.

    python benchmarks/bench_watch.py --against DIR

also runs a second `torchcode watch` from another checkout DIR (its torchcode first on PYTHONPATH, e.g.
a clone of main before a change), saves alternating between the two, and prints the ratio: on a busy
machine the absolute times move with the load, the ratio much less.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("problem", nargs="?", default="gqa")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--against", type=Path, help="another checkout, timed in the same run, saves alternating")
    args = ap.parse_args()
    solution = (ROOT / "solutions" / f"{args.problem}.py").read_text()
    trees = {"this": None, **({"against": args.against.resolve()} if args.against else {})}
    with tempfile.TemporaryDirectory(prefix="bench-watch-") as d:
        d = Path(d)
        runs = {name: _start(d / name, args.problem, solution, tree) for name, tree in trees.items()}
        try:
            first = {name: _wait(run, 0, run["started"]) for name, run in runs.items()}
            times: dict[str, list[float]] = {name: [] for name in runs}
            for i in range(args.rounds):
                for name, run in runs.items():
                    time.sleep(1.0)
                    n = run["shown"]()
                    t = time.perf_counter()
                    run["file"].write_text(f"{solution}\n# edit {i}\n")
                    times[name].append(_wait(run, n, t))
            graded = {name: [float(x) for x in re.findall(r"cases  ([0-9.]+)s", run["out"].read_text())[1:]]
                      for name, run in runs.items()}
        finally:
            for run in runs.values():
                run["p"].send_signal(signal.SIGINT)
            for run in runs.values():
                try:
                    run["p"].wait(60)
                except subprocess.TimeoutExpired:
                    run["p"].kill()  # (its session process follows it: it watches for its parent)
                    run["p"].wait()
                    print(f"warning: {run['file']}'s watch did not stop on Ctrl-C within 60 s", file=sys.stderr)
    medians = {}
    for name in runs:
        ms = sorted(t * 1000 for t in times[name])
        medians[name] = statistics.median(ms)
        who = f" ({trees[name]})" if trees[name] else ""
        print(f"{args.problem}{who}: watch start to first report {first[name]:.2f} s (the session imports torch once)")
        print(f"save -> report on stdout, {len(ms)} saves: median {medians[name]:.0f} ms, "
              f"min {ms[0]:.0f} ms, max {ms[-1]:.0f} ms")
        if graded[name]:
            print(f"the grade itself (the report's own time): median {statistics.median(graded[name]) * 1000:.0f} ms")
    if args.against:
        print(f"ratio this/against, save -> report: {medians['this'] / medians['against']:.2f}")
    print(f"load average during the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")


def _start(d: Path, problem: str, solution: str, tree: Path | None) -> dict:
    """`torchcode watch` on a file of its own in ``d`` (from ``tree``'s torchcode when given), output to a file."""
    d.mkdir()
    file, out = d / f"{problem}.py", d / "watch.out"
    file.write_text(solution)
    env = {**os.environ, "TORCHCODE_HOME": str(d / "home"), "NO_COLOR": "1", "COLUMNS": "120"}
    if tree is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(tree), *filter(None, [os.environ.get("PYTHONPATH")])])
    header = re.compile(re.escape(file.name) + r" at \d\d:\d\d:\d\d")
    started = time.perf_counter()
    with open(out, "w") as o:
        p = subprocess.Popen([sys.executable, "-m", "torchcode", "watch", str(file), "--problem", problem,
                              "--device", "cpu"], stdout=o, stderr=subprocess.DEVNULL, env=env, cwd=d)
    return {"p": p, "file": file, "out": out, "started": started,
            "shown": lambda: len(header.findall(out.read_text()))}


def _wait(run: dict, n: int, t: float | None = None) -> float:
    """Seconds from ``t`` (now if None) until more than ``n`` reports are on the watch's stdout."""
    t = time.perf_counter() if t is None else t
    while run["shown"]() <= n:
        time.sleep(0.002)
    return time.perf_counter() - t


if __name__ == "__main__":
    main()

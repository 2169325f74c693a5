"""From save to report through the real `torchcode watch`, file watcher included.

    python benchmarks/bench_watch.py [PROBLEM] [--rounds N]

Starts `torchcode watch FILE` (a subprocess, output to a file), then each round saves the file
(the reference solution with a new comment, as an editor would, a second after the last report)
and times until the new report's header is on watch's stdout. bench_session.py measures the
session alone; the difference is what watch adds (the watcher's quiet period, reading the event,
rendering). Progress goes to a temporary TORCHCODE_HOME.
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
    args = ap.parse_args()
    solution = (ROOT / "solutions" / f"{args.problem}.py").read_text()
    with tempfile.TemporaryDirectory(prefix="bench-watch-") as d:
        d = Path(d)
        file, out = d / f"{args.problem}.py", d / "watch.out"
        file.write_text(solution)
        env = {**os.environ, "TORCHCODE_HOME": str(d / "home"), "NO_COLOR": "1", "COLUMNS": "120"}
        header = re.compile(re.escape(file.name) + r" at \d\d:\d\d:\d\d")
        with open(out, "w") as o:
            p = subprocess.Popen([sys.executable, "-m", "torchcode", "watch", str(file), "--problem", args.problem,
                                  "--device", "cpu"], stdout=o, stderr=subprocess.DEVNULL, env=env, cwd=d)
        try:
            shown = lambda: len(header.findall(out.read_text()))  # noqa: E731
            t = time.perf_counter()
            while shown() < 1:
                time.sleep(0.005)
            first = time.perf_counter() - t
            times = []
            for i in range(args.rounds):
                time.sleep(1.0)
                n = shown()
                t = time.perf_counter()
                file.write_text(f"{solution}\n# edit {i}\n")
                while shown() <= n:
                    time.sleep(0.002)
                times.append(time.perf_counter() - t)
            graded = [float(x) for x in re.findall(r"cases  ([0-9.]+)s", out.read_text())[1:]]
        finally:
            p.send_signal(signal.SIGINT)
            p.wait(60)
    ms = sorted(t * 1000 for t in times)
    print(f"{args.problem}: watch start to first report {first:.2f} s (the session imports torch once)")
    print(f"save -> report on stdout, {len(ms)} saves: median {statistics.median(ms):.0f} ms, "
          f"min {ms[0]:.0f} ms, max {ms[-1]:.0f} ms")
    if graded:
        print(f"the grade itself (the report's own time): median {statistics.median(graded) * 1000:.0f} ms")
    print(f"load average during the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()

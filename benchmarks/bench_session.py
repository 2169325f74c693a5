"""Warm re-check vs cold `torchcode check`, measured in the same run.

    python benchmarks/bench_session.py [PROBLEM] [--rounds N]

Cold: the real `torchcode check PROBLEM` command, a new process each time (imports torch, forks
its zygote, grades, records). Warm: a `torchcode.session.Session` kept open, as `watch`, Jupyter
and `serve` keep it; each round saves the file (as an editor would), grades it and renders the
report to text: "from the moment the file is saved to the verdict on screen", less the file
watcher's own latency. Rounds are a second apart (a learner edits between checks; the session
uses that time to start the next worker and build the next cases). Target (issue 12): warm gqa at
most 0.3 s on CPU.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def cold(problem: str, file: Path, env: dict, rounds: int) -> list[float]:
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "torchcode", "check", str(file), "--problem", problem, "--device", "cpu"],
                       env=env, capture_output=True, check=False)
        times.append(time.perf_counter() - t)
    return times


def warm(problem: str, file: Path, rounds: int) -> tuple[list[float], float]:
    from rich.console import Console

    from torchcode.grader.limits import Limits
    from torchcode.render.report import report as render
    from torchcode.session import Session

    source = file.read_text()
    times = []
    t = time.perf_counter()
    with Session(limits=Limits(device="cpu")) as s:
        s.warm([problem])
        s.grade(problem, path=file)
        start = time.perf_counter() - t
        for i in range(rounds):
            time.sleep(1.0)
            file.write_text(source + f"\n# edit {i}\n")  # saved
            t = time.perf_counter()
            report = s.grade(problem, path=file)
            con = Console(record=True, width=100, file=open(os.devnull, "w"))
            render(con, report, display_file=file.name)
            con.export_text()
            times.append(time.perf_counter() - t)
            if not report.passed:
                raise SystemExit(f"the reference was not accepted: {report.message}")
    return times, start


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("problem", nargs="?", default="gqa")
    ap.add_argument("--rounds", type=int, default=10)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "TORCHCODE_HOME": str(Path(tmp) / "home")}
        os.environ["TORCHCODE_HOME"] = env["TORCHCODE_HOME"]
        file = Path(tmp) / f"{a.problem}.py"
        file.write_text((ROOT / "solutions" / f"{a.problem}.py").read_text())
        c = cold(a.problem, file, env, max(3, a.rounds // 3))
        w, start = warm(a.problem, file, a.rounds)
    cm, wm = statistics.median(c), statistics.median(w)
    print(f"{a.problem} on CPU, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    print(f"  cold `torchcode check`      median {cm:6.3f} s  (of {len(c)}: {', '.join(f'{x:.2f}' for x in c)})")
    print(f"  warm session: start         {start:6.3f} s  (once: import torch, zygote, reference)")
    print(f"  warm re-check, save->shown  median {wm:6.3f} s  (of {len(w)}: min {min(w):.3f}, max {max(w):.3f})")
    print(f"  ratio warm/cold             {wm / cm:6.3f}   ({cm / wm:.1f}x faster)")
    print(f"  target warm <= 0.300 s      {'met' if wm <= 0.3 else 'NOT met'}")


if __name__ == "__main__":
    main()

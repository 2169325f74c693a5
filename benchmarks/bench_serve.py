"""Speed of `torchcode serve`: page load, and a check from the browser against the warm check without one.

    python benchmarks/bench_serve.py [--runs 5] [--problem sdpa]

Targets (issue "A browser workspace"):
  page load (list and problem page, in Chromium: navigation start to the load event)   < 300 ms
  a check from the browser (click to report shown)   no slower than the warm check without it
                                                       (Session.grade in a warm session: what
                                                       `watch` and Jupyter do), plus a little
Checks are a second apart, in every column alike (a learner edits between checks; the warm
session uses that time to start the next worker). Also shown: the server's own answer time for each page (plain HTTP) and the CLI's `torchcode check`
(a cold process: it imports torch each time). Every figure is the median of --runs runs; the
browser figures need Debian's chromium and chromium-driver (skipped with a note otherwise).
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
GAP = 1.0  # seconds between checks, as a learner edits between them (the session uses them to get ahead)
sys.path.insert(0, str(ROOT / "tests"))

from serving import start_server, stop_server  # noqa: E402


def median_ms(fn, runs: int, gap: float = 0.0) -> float:
    times = []
    for _ in range(runs):
        time.sleep(gap)
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1000


def browser():
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver") or ("/usr/lib/chromium/chromedriver" if os.path.exists("/usr/lib/chromium/chromedriver") else None)
    if not (chromium and driver):
        return None
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,1000"):
        opts.add_argument(arg)
    return webdriver.Chrome(service=Service(executable_path=driver), options=opts)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--problem", default="sdpa")
    args = ap.parse_args()
    pid, runs = args.problem, args.runs
    solution = (ROOT / "solutions" / f"{pid}.py").read_text()
    tmp = Path(tempfile.mkdtemp(prefix="torchcode-bench-serve-"))
    folder, home = tmp / "ws", tmp / "home"
    folder.mkdir()
    (folder / f"{pid}.py").write_text(solution)
    env = {**os.environ, "TORCHCODE_HOME": str(home)}
    print(f"# {platform.node()} {platform.machine()} {os.cpu_count()} cpus, python {platform.python_version()}, "
          f"problem {pid}, median of {runs}")
    os.environ["TORCHCODE_HOME"] = str(home)
    served = start_server(folder, home)
    d = None
    try:
        served.request("POST", f"/api/p/{pid}/check", body={})  # the session up and this problem warm
        for path in ("/", f"/p/{pid}"):
            ms = median_ms(lambda: served.request("GET", path), runs)
            print(f"server answers GET {path:<14} {ms:8.1f} ms")
        d = browser()
        if d is None:
            print("browser figures skipped: chromium / chromedriver not found (apt-get install chromium chromium-driver)")
        else:
            d.get(served.url)
            for path in ("/", f"/p/{pid}"):
                loads = []
                for _ in range(runs):
                    d.get(served.base + path)
                    loads.append(d.execute_script(
                        "const t = performance.getEntriesByType('navigation')[0]; return t.loadEventEnd - t.startTime;"))
                print(f"page load in Chromium {path:<11} {statistics.median(loads):8.1f} ms   (target < 300 ms)")
            d.get(served.base + f"/p/{pid}")
            d.set_script_timeout(300)
        times = checks(served, d, pid, folder / f"{pid}.py", runs)
    finally:
        if d is not None:
            d.quit()
        stop_server(served)
    for kind, label in (("warm", "warm check, no browser (Session.grade + report)"),
                        ("http", "check over HTTP (no browser)"), ("browser", "check from the browser (click to report)")):
        if times[kind]:
            print(f"{label:<48} {statistics.median(times[kind]):8.1f} ms")
    if times["browser"]:
        print(f"browser check / warm check: {statistics.median(times['browser']) / statistics.median(times['warm']):.2f}x")
    exe = shutil.which("torchcode") or sys.executable
    cmd = [exe, "check", pid] if exe != sys.executable else [exe, "-m", "torchcode", "check", pid]
    cli_ms = median_ms(lambda: subprocess.run(cmd, cwd=folder, env=env, stdout=subprocess.DEVNULL,
                                              stderr=subprocess.DEVNULL, check=False), runs)
    print(f"{'torchcode check (a cold CLI process)':<48} {cli_ms:8.1f} ms")
    shutil.rmtree(tmp, ignore_errors=True)


def checks(served, d, pid: str, path: Path, runs: int) -> dict[str, list[float]]:
    """Rounds of: a warm check in this process, one over HTTP, one from the browser, each after GAP;
    interleaved so that the machine's load weighs on all three alike."""
    from rich.console import Console

    from torchcode.render.report import report as render
    from torchcode.session import Session

    times: dict[str, list[float]] = {"warm": [], "http": [], "browser": []}
    with Session() as s:
        s.grade(pid, path=path)
        for _ in range(runs):
            time.sleep(GAP)
            t = time.perf_counter()
            r = s.grade(pid, path=path)
            con = Console(record=True, width=100)
            with con.capture():
                render(con, r, display_file=path.name)
            times["warm"].append((time.perf_counter() - t) * 1000)
            time.sleep(GAP)
            t = time.perf_counter()
            served.request("POST", f"/api/p/{pid}/check", body={})
            times["http"].append((time.perf_counter() - t) * 1000)
            if d is None:
                continue
            while d.execute_script("return document.getElementById('check').textContent") != "Check":
                time.sleep(0.02)  # the last check's tidy-up
            time.sleep(GAP)
            times["browser"].append(d.execute_async_script("""
                const done = arguments[arguments.length - 1];
                const t0 = performance.now();
                document.getElementById('report').replaceChildren();
                document.getElementById('check').click();
                const poll = () => document.getElementById('report-text')
                    ? done(performance.now() - t0) : setTimeout(poll, 5);
                poll();"""))
    return times


if __name__ == "__main__":
    main()

"""Every reference, right/ and wrong/ variant graded on CUDA in every declared dtype, one line per file as it comes.

    python benchmarks/gpu_corpus.py sdpa,gqa minimind_attention:0:2 ...

Each argument is a group graded in its own process (one Grader each), all groups at once; `PID:K:N` takes every
N-th file of PID from the K-th (to split a long problem across processes). The same check as
tests/test_devices.py::test_cuda_grading, but streamed: a device call cut at its time limit still shows every
verdict so far. Lines start "ok " or "BAD"; the last line counts them.
"""

from __future__ import annotations

import subprocess
import sys
import time

GROUP = r"""
import sys, time
from torchcode.authoring.validate import expected_verdict
from torchcode.catalog import load_catalog
from torchcode.grader.judge import Grader, Limits

cat = load_catalog()
with Grader(Limits(device="cuda")) as g:
    for item in sys.argv[1].split(","):
        pid, k, n = (item.split(":") + ["0", "1"])[:3]
        spec = cat.get(pid)
        paths = [spec.solution_path, *spec.variants("right"), *spec.variants("wrong")][int(k)::int(n)]
        for path in paths:
            want = "accepted" if path == spec.solution_path else expected_verdict(path)
            t = time.perf_counter()
            r = g.grade(spec, path, seed=1)
            ok = r.verdict.value == want and r.dtypes == list(spec.grading.dtypes)
            why = "" if ok else f" :: in {r.dtypes} " + repr(r.message[:400])
            print(f"{'ok ' if ok else 'BAD'} {pid}/{path.parent.name}/{path.name}: {r.verdict.value} (want {want}) "
                  f"{time.perf_counter() - t:.1f}s{why}", flush=True)
"""


def main() -> None:
    t = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-c", GROUP, group], stdout=subprocess.PIPE, text=True)
             for group in sys.argv[1:]]
    good = bad = 0
    import selectors

    sel = selectors.DefaultSelector()
    for p in procs:
        sel.register(p.stdout, selectors.EVENT_READ)
    open_ = len(procs)
    while open_:
        for key, _ in sel.select():
            line = key.fileobj.readline()
            if not line:
                sel.unregister(key.fileobj)
                open_ -= 1
                continue
            good += line.startswith("ok ")
            bad += line.startswith("BAD")
            print(line, end="", flush=True)
    codes = [p.wait() for p in procs]
    print(f"{good} ok, {bad} BAD, group exit codes {codes}, {time.perf_counter() - t:.0f} s", flush=True)


if __name__ == "__main__":
    main()

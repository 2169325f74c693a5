"""`bench` and `grade --bench` time the learner's kernel from outside its process, on new inputs every call,
with every output checked: a kernel that forges its reply, patches the clock, caches outputs or returns
garbage at the benchmark's sizes gets a failure or an honest time, never a fast row."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

HOSTILE = Path(__file__).parent / "hostile"
FAILS = "Only correct results are timed"


def bench(cli, path: Path, *extra: str):
    r = cli("bench", "sdpa", str(path), "--sizes", "256", "--reps", "3", "--json", "--device", "cpu", *extra)
    assert "Traceback" not in r.err, r.err
    return r


def honest(row: dict) -> bool:
    """A time of the same order as the reference's (the same algorithm), not a forged or cached one."""
    return row["learner_s"] >= 0.25 * row["reference_s"] and row["learner_wall_s"] >= row["learner_s"] > 1e-3


def refused(grader, catalog, path: Path) -> str:
    """What `bench sdpa FILE --sizes 256 --reps 3 --device cpu` says when it refuses to time the file (its usage
    error: exit 2), from the same grade and benchmark, on the grader of this process (test_bench runs the command
    itself end to end; this saves a torch import per file)."""
    from torchcode.errors import UsageError
    from torchcode.grader.bench import run_bench

    spec = catalog.get("sdpa")
    assert grader.grade(spec, path, dtypes=["float32"]).passed  # `bench` grades first: these files are correct
    with pytest.raises(UsageError) as e:
        run_bench(grader, spec, path, dtype="float32", sizes=[256], reps=3)
    return str(e.value)


@pytest.mark.parametrize("name", ["bench_forges_reply", "bench_caches_by_shape", "bench_wrong_at_bench_sizes",
                                  "bench_output_raises_when_read"])
def test_forged_cached_or_wrong_results_are_a_failure_not_a_row(grader, catalog, name):
    said = refused(grader, catalog, HOSTILE / f"{name}.py")
    assert FAILS in said and "size 256" in said, said


def test_a_reply_sent_ahead_of_its_request_is_a_failure(grader, catalog):
    """The kernel answers each call itself and lets the worker answer again: the grader's next request
    would find an answer waiting (which holds the previous call's output)."""
    said = refused(grader, catalog, HOSTILE / "bench_replies_early.py")
    assert "size 256" in said, said
    assert ("a message it had not asked for" in said or "stopped reading the grader's requests" in said
            or FAILS in said), said


def test_a_patched_clock_changes_nothing(cli):
    """time.perf_counter replaced in the worker: it used to report 1e-9 s; the clock that counts is outside."""
    r = bench(cli, HOSTILE / "bench_patches_timer.py")
    assert r.code == 0, r.err
    row, = json.loads(r.out)["rows"]
    assert honest(row), row


def test_a_cache_keyed_on_addresses_gets_a_failure_or_an_honest_time(cli):
    """New tensors may land where old ones were (then the replayed output is wrong), or not (then it computes)."""
    r = cli("bench", "sdpa", str(HOSTILE / "bench_caches_by_data_ptr.py"), "--sizes", "256,512", "--reps", "3",
            "--json", "--device", "cpu")
    assert "Traceback" not in r.err, r.err
    if r.code:
        assert r.code == 2 and FAILS in r.err and "does not match the reference" in r.err, r.err
    else:
        assert all(honest(row) for row in json.loads(r.out)["rows"]), r.out


def test_a_correct_kernel_is_timed_with_the_real_cost_of_its_work(cli, workdir):
    src = (ROOT / "solutions" / "sdpa.py").read_text()
    (workdir / "sdpa.py").write_text(src)
    r = bench(cli, workdir / "sdpa.py")
    assert r.code == 0, r.err
    row, = json.loads(r.out)["rows"]
    assert honest(row) and row["learner_s"] <= 4 * row["reference_s"], row
    assert json.loads(r.out)["clock"] == "cpu" and 0 < row["overhead_s"] < row["learner_wall_s"]
    # the same kernel doing all its work eight times over: the clock outside sees all of it
    (workdir / "slow.py").write_text(src + "\n\n_once = scaled_dot_product_attention\n\n\n"
                                     "def scaled_dot_product_attention(Q, K, V, mask=None):\n"
                                     "    for _ in range(7):\n        _once(Q, K, V, mask)\n"
                                     "    return _once(Q, K, V, mask)\n")
    r = bench(cli, workdir / "slow.py")
    assert r.code == 0, r.err
    slow, = json.loads(r.out)["rows"]
    assert slow["ratio"] >= 4 and slow["learner_s"] >= 3 * row["learner_s"], (row, slow)  # 8x the reference's work


def test_grade_bench_ranks_only_trusted_times(tmp_path):
    """A class where one student's kernel caches its output and another forges the bench reply: both are
    accepted by grading, neither gets a time or a rank; the honest kernel is ranked first."""
    work = tmp_path / "class"
    for student, src in (("alice", ROOT / "solutions" / "sdpa.py"), ("mallory", HOSTILE / "bench_caches_by_shape.py"),
                         ("trudy", HOSTILE / "bench_forges_reply.py")):
        (work / student).mkdir(parents=True)
        shutil.copy(src, work / student / "sdpa.py")
    out = tmp_path / "out"
    exe = shutil.which("torchcode")
    env = {**os.environ, "COLUMNS": "160", "NO_COLOR": "1", "TORCHCODE_HOME": str(tmp_path / "home")}
    env.pop("TORCHCODE_PROBLEMS", None)
    p = subprocess.run([*([exe] if exe else [sys.executable, "-m", "torchcode"]), "grade", str(work), "--problems",
                        "sdpa", "--out", str(out), "--device", "cpu", "--workers", "1", "--bench"], cwd=tmp_path,
                       env=env, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stdout + p.stderr
    with open(out / "grades.csv", newline="") as f:
        sheet = {r["student"]: r for r in csv.DictReader(f)}
    assert all(sheet[s]["verdict"] == "accepted" for s in ("alice", "mallory", "trudy"))
    assert sheet["alice"]["rank"] == "1" and float(sheet["alice"]["x_ref"]) > 0.25
    for cheat in ("mallory", "trudy"):
        assert sheet[cheat]["rank"] == "" and sheet[cheat]["x_ref"] == "" and sheet[cheat]["ms"] == "", sheet[cheat]
        assert f"not timed: {cheat}/sdpa.py" in p.stdout, p.stdout
    assert "does not match the reference" in p.stdout and "malformed result" in p.stdout


def test_the_cpu_clock_survives_threads_that_end_while_it_reads():
    """A thread ending between the listing of /proc/PID/task and the read of its schedstat made the reading
    None, and bench fell back to the wall clock (seen under load: `"clock": "wall"`)."""
    import os
    import threading

    from torchcode.grader.bench import _cpu_seconds

    stop = threading.Event()

    def churn():
        while not stop.is_set():
            short = [threading.Thread(target=lambda: None) for _ in range(8)]
            for t in short:
                t.start()
            for t in short:
                t.join()

    churner = threading.Thread(target=churn)
    churner.start()
    try:
        readings = [_cpu_seconds(os.getpid()) for _ in range(3000)]
    finally:
        stop.set()
        churner.join()
    assert None not in readings

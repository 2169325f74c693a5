"""`torchcode bench`: grading first, timing, peak memory and its growth, JSON (on the CPU; on CUDA where there is a GPU)."""

from __future__ import annotations

import json
import os
import shutil

import pytest
import torch

from conftest import ROOT


def test_bench_flash_attention_shows_linear_memory(cli, workdir):
    shutil.copy(ROOT / "solutions" / "flash_attention.py", workdir / "flash_attention.py")
    r = cli("bench", "flash_attention", "--sizes", "128,256,512", "--reps", "2", "--json", "--device", "cpu")
    assert r.code == 0, r.err
    report = json.loads(r.out)
    assert report["device"] == "cpu" and [row["size"] for row in report["rows"]] == [128, 256, 512]
    for row in report["rows"]:
        assert row["learner_s"] > 0 and row["reference_s"] > 0 and row["baseline_s"] > 0
    # tiles: memory doubles with S; the fused kernel's score matrix quadruples
    assert all(abs(k - 1.0) < 0.3 for k in report["learner_peak_exponent"][1:])
    fused = [row["baseline_peak"] for row in report["rows"]]
    assert fused[2] >= 12 * fused[0]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (none on this machine)")
def test_bench_on_cuda_measures_the_kernel_not_one_time_costs(cli, workdir):
    shutil.copy(ROOT / "solutions" / "flash_attention.py", workdir / "flash_attention.py")
    r = cli("bench", "flash_attention", "--device", "cuda", "--reps", "2", "--json")
    assert r.code == 0, r.err
    report = json.loads(r.out)
    assert report["device"] == "cuda" and [row["size"] for row in report["rows"]] == [1024, 2048, 4096]
    # no workspace or kernel loading in the first row: memory grows linearly from the start
    assert all(abs(k - 1.0) < 0.3 for k in report["learner_peak_exponent"][1:]), report["learner_peak_exponent"]
    assert all(row["reference_s"] < 2.0 for row in report["rows"])


def test_bench_table(cli, workdir):
    src = (ROOT / "problems" / "flash_attention" / "right" / "keys_outer_loop.py").read_text()
    (workdir / "flash_attention.py").write_text(src)
    r = cli("bench", "flash_attention", "--sizes", "128,256", "--reps", "1", "--device", "cpu", env={"COLUMNS": "60"})
    assert r.code == 0, r.err
    assert "x ref" in r.out and "mem k" in r.out and "256" in r.out
    # narrower than the table (a pipe gets 80 columns): every column whole, never cropped ("512K" shown as "512")
    assert "fused pk" in r.out and "…" not in r.out, r.out
    row = next(line for line in r.out.splitlines() if line.split()[:1] == ["256"]).split()
    assert row[-1][-1] in "KMG" and row[-2][-1] in "KMG", row


def test_warning_when_memory_grows_faster_than_the_reference():
    import io

    from rich.console import Console

    from torchcode.grader.bench import BenchReport, BenchRow
    from torchcode.render.bench import table

    rows = [BenchRow(s, 0.001 * s, 0.001 * s, learner_peak=4 * s * s, reference_peak=64 * s) for s in (128, 256, 512)]
    out = io.StringIO()
    table(Console(file=out, width=120), BenchReport("flash_attention", "f.py", "cpu", "float32", 3, rows), "f.py")
    assert "grows like size^2.0 where the reference's grows like size^1.0" in out.getvalue()


def test_bench_refuses_a_rejected_kernel(cli, workdir):
    shutil.copy(ROOT / "problems" / "flash_attention" / "wrong" / "full_matrix.py", workdir / "flash_attention.py")
    r = cli("bench", "flash_attention", "--sizes", "64", "--device", "cpu")
    assert r.code == 1 and "Only correct kernels are benchmarked" in r.err


def test_bench_refusal_names_the_pack_to_check_with(cli, workdir):
    """A pack's problem: the check to run first needs the pack (without it: "no problem named ...")."""
    pack = ROOT / "tests" / "fixtures" / "course_pack"
    shutil.copy(pack / "problems" / "good_attention" / "wrong" / "missing_scale.py", workdir / "good_attention.py")
    r = cli("bench", "good_attention", "--sizes", "64", "--device", "cpu", "--problems-dir", str(pack))
    assert r.code == 1, r.text
    shown = os.path.relpath(pack, workdir)  # as check's reproduce line names it
    assert f"run `torchcode check good_attention --problems-dir {shown}` first" in " ".join(r.err.split()), r.err


def test_bench_refusal_of_another_file_names_that_file(cli, workdir):
    shutil.copy(ROOT / "problems" / "flash_attention" / "wrong" / "full_matrix.py", workdir / "mine.py")
    r = cli("bench", "flash_attention", "mine.py", "--sizes", "64", "--device", "cpu")
    assert r.code == 1 and "run `torchcode check mine.py --problem flash_attention` first" in " ".join(r.err.split())


def test_bench_problem_without_benchmark(cli, workdir):
    shutil.copy(ROOT / "solutions" / "rope.py", workdir / "rope.py")
    r = cli("bench", "rope", "--device", "cpu")
    assert r.code == 2 and "no benchmark" in r.err


def test_bench_module_problem(cli, workdir):
    shutil.copy(ROOT / "solutions" / "gqa.py", workdir / "gqa.py")
    r = cli("bench", "gqa", "--sizes", "32,64", "--reps", "1", "--json", "--device", "cpu")
    assert r.code == 0, r.err
    rows = json.loads(r.out)["rows"]
    assert rows[0]["baseline_s"] is None and rows[1]["learner_peak"] > rows[0]["learner_peak"]


def test_a_kernel_stopped_by_the_memory_watch_is_told_so(grader, catalog, tmp_path, monkeypatch):
    """On CUDA the grader watches the worker's host memory (no address-space limit; the CPU stands in, as in
    test_worker_start): a kernel stopped there in bench is told it went past --memory-limit, not that its process
    'ended or sent back a malformed result'."""
    from test_worker_start import HOARDER

    from torchcode.errors import UsageError
    from torchcode.grader import judge
    from torchcode.grader.bench import run_bench
    from torchcode.grader.limits import Limits

    monkeypatch.setattr(judge, "bounds_address_space", lambda device: False)
    path = tmp_path / "hoard.py"
    path.write_text(HOARDER)
    old, grader.limits = grader.limits, Limits(device="cpu", memory_mb=300)
    try:
        with pytest.raises(UsageError) as e:
            run_bench(grader, catalog.get("sdpa"), path, sizes=[64], warmup=1, reps=1)
    finally:
        grader.limits = old
    assert "more host memory at size 64, past the memory limit (--memory-limit)" in str(e.value), str(e.value)

"""Device selection and the dtype matrix. CPU paths run everywhere; CUDA tests need a GPU."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from conftest import ROOT
from torchcode.grader.judge import default_dtypes, resolve_device
from torchcode.grader.limits import Limits

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (none on this machine)")


def test_auto_device_is_cpu_without_gpu():
    assert resolve_device("auto") == ("cuda" if torch.cuda.is_available() else "cpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_cuda_without_gpu_is_a_clear_error(cli, workdir):
    shutil.copy(ROOT / "solutions" / "sdpa.py", workdir / "sdpa.py")
    r = cli("check", "sdpa", "--device", "cuda")
    assert r.code == 2 and "no CUDA device" in r.err and "Traceback" not in r.err


def test_default_dtypes(catalog):
    assert default_dtypes(catalog.get("flash_attention"), "cpu") == ["float32"]
    assert default_dtypes(catalog.get("flash_attention"), "cuda") == ["float32", "bfloat16", "float16"]
    assert catalog.get("rope").grading.dtypes == ("float32",)


@pytest.mark.parametrize("pid", ["sdpa", "flash_attention", "kv_cache", "minimind_attention"])
def test_low_precision_on_cpu_accepts_correct_code(grader, catalog, pid):
    spec = catalog.get(pid)
    for path in [spec.solution_path, *spec.variants("right")]:
        report = grader.grade(spec, path, seed=3, dtypes=["float32", "bfloat16", "float16"])
        assert report.passed, (path.name, report.message)
        assert {c.name.split(" [")[-1] for c in report.cases} >= {"bfloat16]", "float16]"}


def test_low_precision_still_catches_mistakes(grader, catalog):
    spec = catalog.get("flash_attention")
    for name in ("no_accumulator_rescale", "no_running_max", "full_matrix"):
        report = grader.grade(spec, spec.folder / "wrong" / f"{name}.py", seed=3, dtypes=["bfloat16"])
        assert not report.passed, name


def test_dtype_option_through_the_cli(cli, workdir):
    shutil.copy(ROOT / "solutions" / "sdpa.py", workdir / "sdpa.py")
    r = cli("check", "sdpa", "--dtype", "all", "--json")
    report = json.loads(r.out)
    assert r.code == 0 and report["dtypes"] == ["float32", "bfloat16", "float16"]
    assert any(c["name"].endswith("[float16]") for c in report["cases"])
    assert cli("check", "sdpa", "--dtype", "float64").code == 2
    r = cli("check", "rope", "--problem", "rope", "--dtype", "bfloat16")
    assert r.code == 2


@cuda
@pytest.mark.parametrize("pid", ["sdpa", "flash_attention", "gqa", "kv_cache", "minimind_attention"])
def test_cuda_grading(grader, catalog, pid):
    spec = catalog.get(pid)
    old, grader.limits = grader.limits, Limits(device="cuda")
    try:
        for path in [spec.solution_path, *spec.variants("right")]:
            report = grader.grade(spec, path, seed=1)
            assert report.passed, (path.name, report.message)
        for path in spec.variants("wrong"):
            assert not grader.grade(spec, path, seed=1).passed, path.name
    finally:
        grader.limits = old


@cuda
def test_mask_built_on_cpu_is_a_device_verdict(grader, catalog, tmp_path):
    src = (ROOT / "solutions" / "causal_attention.py").read_text().replace(", device=Q.device", "")
    f = tmp_path / "causal_attention.py"
    f.write_text(src)
    old, grader.limits = grader.limits, Limits(device="cuda")
    try:
        report = grader.grade(catalog.get("causal_attention"), f, seed=1)
    finally:
        grader.limits = old
    assert report.verdict.value == "wrong_device", report.message
    assert "device=x.device" in report.message

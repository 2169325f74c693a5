"""Code accepted on the CPU that would fail on a GPU is told so (torchcode.grader.portable).

A dry run on the meta device, after the cases pass: it stands in for a GPU (only 0-dim CPU tensors may
meet its tensors) without one. It is advice, never a verdict: the code is correct on the CPU.
"""

from __future__ import annotations

import json
import time

from conftest import ROOT

GPU = "would fail on a GPU"


def from_reference(pid: str, old: str, new: str) -> str:
    src = (ROOT / "solutions" / f"{pid}.py").read_text()
    assert old in src, f"{old!r} is not in the reference of {pid}"
    return src.replace(old, new)


def test_a_mask_made_on_the_cpu_is_accepted_with_the_line_to_fix(cli, workdir):
    (workdir / "causal_attention.py").write_text(from_reference("causal_attention", ", device=Q.device", ""))
    r = cli("check", "causal_attention.py", "--device", "cpu", "--seed", "3", "--gpu-dry-run")
    assert r.code == 0, r.text
    assert "Accepted" in r.out and GPU in r.out
    assert "line 11 (`causal = torch.ones(S, S, dtype=torch.bool).tril()`) makes a tensor on the CPU" in r.out
    assert "device=Q.device" in r.out

    r = cli("check", "causal_attention.py", "--device", "cpu", "--seed", "3", "--json", "--gpu-dry-run")
    report = json.loads(r.out)
    assert report["verdict"] == "accepted" and len(report["advice"]) == 1 and "line 11" in report["advice"][0]

    (workdir / "causal_attention.py").write_text((ROOT / "solutions" / "causal_attention.py").read_text())
    report = json.loads(cli("check", "causal_attention.py", "--device", "cpu", "--json", "--gpu-dry-run").out)
    assert report["verdict"] == "accepted" and report["advice"] == []

    (workdir / "causal_attention.py").write_text(from_reference("causal_attention", ", device=Q.device", ""))
    report = json.loads(cli("check", "causal_attention.py", "--device", "cpu", "--json").out)
    assert report["verdict"] == "accepted" and report["advice"] == [], "only asked for: it costs seconds"


def test_the_line_quoted_is_the_line_python_ran(grader, catalog, tmp_path):
    """Line numbers are Python's (it ends lines only at \\n, \\r\\n, \\r); a form feed (an editor's page break) or a
    line separator in a comment must not shift the quote onto another line of the learner's choosing."""
    src = from_reference("causal_attention", ", device=Q.device", "")
    src = src.replace('"""Reference: causal self-attention."""',
                      '"""Reference: causal self-attention."""\n\x0c\n# page two\u2028x = torch.ones(3)  # GPU-safe, checked')
    f = tmp_path / "causal_attention.py"
    f.write_text(src, encoding="utf-8")
    report = grader.grade(catalog.get("causal_attention"), f, seed=3, gpu_dry_run=True)
    assert report.passed and len(report.advice) == 1, (report.message, report.advice)
    assert "line 13 (`causal = torch.ones(S, S, dtype=torch.bool).tril()`) makes a tensor" in report.advice[0], report.advice


def test_an_output_buffer_on_the_cpu_and_a_table_kept_on_self(grader, catalog, tmp_path):
    # the output written into a buffer made on the CPU: on a GPU the copy works and the result is on the CPU
    f = tmp_path / "causal_attention.py"
    f.write_text(from_reference("causal_attention", "    return weights @ V",
                                "    out = torch.zeros(V.shape[:-2] + (weights.shape[-2], V.shape[-1]))\n"
                                "    out[...] = weights @ V\n"
                                "    return out"))
    report = grader.grade(catalog.get("causal_attention"), f, seed=1, gpu_dry_run=True)
    assert report.passed, report.message
    assert len(report.advice) == 1 and GPU in report.advice[0], report.advice
    assert "`out = torch.zeros(" in report.advice[0]

    # a module whose tensor attribute (not a buffer) stays on the CPU when the module moves to the GPU
    f = tmp_path / "gqa.py"
    src = from_reference("gqa", "        self.W_o = nn.Linear(d_model, d_model)\n",
                         "        self.W_o = nn.Linear(d_model, d_model)\n"
                         "        self.scale = torch.full((1,), self.d_k ** -0.5)  # a plain attribute, not a buffer\n")
    f.write_text(src.replace("scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)",
                             "scores = q @ k.transpose(-2, -1) * self.scale"))
    report = grader.grade(catalog.get("gqa"), f, seed=1, gpu_dry_run=True)
    assert report.passed, report.message
    assert len(report.advice) == 1 and "uses a tensor that is on the CPU" in report.advice[0], report.advice
    assert "* self.scale" in report.advice[0]


def test_code_right_in_float32_but_not_in_a_gpus_low_precision_is_told_so(grader, catalog, tmp_path):
    """The CPU grades float32 alone; a GPU grades bfloat16 too. The dry run tries the smallest case in it (on meta:
    dtypes only, no values): an output that comes back float32, or two dtypes met in one operation."""
    spec = catalog.get("causal_attention")
    f = tmp_path / "causal_attention.py"
    f.write_text(from_reference("causal_attention", "    return weights @ V", "    return weights.float() @ V.float()"))
    report = grader.grade(spec, f, seed=1, gpu_dry_run=True)
    assert report.passed and report.dtypes == ["float32"], report.message
    assert len(report.advice) == 1 and "grades bfloat16 too" in report.advice[0], report.advice
    assert "comes back in float32 where the inputs are bfloat16" in report.advice[0]
    assert "--dtype all" in report.advice[0]

    f.write_text(from_reference("causal_attention", "    return weights @ V", "    return weights.float() @ V"))
    report = grader.grade(spec, f, seed=1, gpu_dry_run=True)
    assert report.passed, report.message
    assert len(report.advice) == 1 and "(`return weights.float() @ V`) meets two dtypes" in report.advice[0], report.advice

    # graded in every dtype already (--dtype all): nothing to try, nothing said
    report = grader.grade(spec, f, seed=1, gpu_dry_run=True, dtypes=list(spec.grading.dtypes))
    assert not report.passed and report.advice == []

    # a module: its weights are cast too; the reference keeps the dtype
    report = grader.grade(catalog.get("gqa"), ROOT / "solutions" / "gqa.py", seed=1, gpu_dry_run=True)
    assert report.passed and report.advice == [], report.advice

    # a module with many cases, some long: the dtype is tried first, in its own time, not after the device's
    f = tmp_path / "kv_cache.py"
    src = (ROOT / "solutions" / "kv_cache.py").read_text()
    assert "return self.W_o(out), (k, v)" in src
    f.write_text(src.replace("return self.W_o(out), (k, v)", "return self.W_o(out).float(), (k, v)"))
    report = grader.grade(catalog.get("kv_cache"), f, seed=1, gpu_dry_run=True)
    assert report.passed, report.message
    assert len(report.advice) == 1 and "comes back in float32 where the inputs are bfloat16" in report.advice[0]


def test_code_that_needs_values_or_stalls_on_the_dry_run_is_still_accepted_without_advice(grader, catalog, tmp_path):
    spec = catalog.get("causal_attention")
    # .item() cannot run without data: nothing can be said, and nothing is
    f = tmp_path / "causal_attention.py"
    f.write_text(from_reference("causal_attention", "    return weights @ V",
                                "    assert not torch.isnan(weights).any().item()\n    return weights @ V"))
    report = grader.grade(spec, f, seed=1, gpu_dry_run=True)
    assert report.passed and report.advice == [], (report.message, report.advice)

    # code that sees the dry run coming and never returns: the dry run is bounded, the verdict stands
    f.write_text(from_reference("causal_attention", "    return weights @ V",
                                "    while Q.is_meta:\n        pass\n    return weights @ V"))
    t = time.monotonic()
    report = grader.grade(spec, f, seed=1, gpu_dry_run=True)
    assert report.passed and report.advice == [], (report.message, report.advice)
    assert time.monotonic() - t < 30


def test_validate_fails_a_reference_or_alternative_that_would_fail_on_a_gpu(cli, workdir):
    import shutil

    src = ROOT / "tests" / "fixtures" / "course_pack"
    pack = workdir / "pack"
    for part in ("problems/good_attention", "solutions/good_attention.py", "templates/good_attention.py.j2"):
        (pack / part).parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if (src / part).is_dir() else shutil.copy)(src / part, pack / part)
    r = cli("validate", "--problems-dir", str(pack), "--seeds", "1", timeout=300)
    assert r.code == 0 and GPU not in r.out, r.text

    solution = pack / "solutions" / "good_attention.py"
    solution.write_text(solution.read_text().replace(
        "/ math.sqrt(Q.size(-1))", "* torch.full((1,), 1 / math.sqrt(Q.size(-1)))"))
    einsum = pack / "problems" / "good_attention" / "right" / "einsum.py"
    einsum.write_text(einsum.read_text().replace(
        "/ Q.shape[-1] ** 0.5", "/ torch.tensor([Q.shape[-1] ** 0.5])"))
    r = cli("validate", "--problems-dir", str(pack), "--seeds", "1", timeout=300)
    assert r.code == 1, r.text
    assert "the reference would fail on a GPU" in r.out and "einsum.py would fail on a GPU" in r.out, r.out

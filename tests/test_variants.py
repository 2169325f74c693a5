"""Every problem's known-wrong submissions are rejected with the intended verdict, and every
correct alternative (and the reference itself) is accepted."""

from __future__ import annotations

import os

import pytest

from conftest import FIXTURES, ROOT, corpus_seed, expected_verdict
from torchcode.catalog import load_catalog

CATALOG = load_catalog()
VARIANTS = [(spec.id, path) for spec in CATALOG.ordered() for kind in ("wrong", "right") for path in spec.variants(kind)]
# One seed per problem (conftest.corpus_seed: fixed unless TORCHCODE_TEST_SEEDS=random): its variants are graded on
# the same cases, which the grader then builds (runs the reference on, in every dtype) once instead of once per
# variant, as for a class graded on one seed.
SEED = {spec.id: corpus_seed(spec.id) for spec in CATALOG.ordered()}


def test_every_problem_has_variants():
    for spec in CATALOG.ordered():
        assert len(spec.variants("wrong")) >= 5, f"{spec.id} needs at least five known-wrong variants"
        assert len(spec.variants("right")) >= 2, f"{spec.id} needs at least two correct alternatives"


@pytest.mark.parametrize("pid,path", VARIANTS, ids=[f"{p}/{f.parent.name}/{f.stem}" for p, f in VARIANTS])
def test_variant_gets_intended_verdict(grader, pid, path):
    """A correct alternative is graded in float32 and in low precision, as a GPU grades (the CPU's default is float32
    alone): it must pass in all of them (right_dtypes). A known-wrong file is graded as a CPU check grades it, in
    float32, where the semantics are tested (GRADING.md: low precision checks robustness, never alone); one that
    float32 accepts (its fault shows in low precision only) again in every declared dtype, as `validate` does. (The
    GPU corpus, benchmarks/gpu_corpus.py, grades every file in every dtype.)"""
    spec = CATALOG.get(pid)
    every = list(spec.grading.dtypes)
    dtypes = right_dtypes(spec, path) if path.parent.name == "right" else ["float32"]
    report = grader.grade(spec, path, seed=SEED[pid], dtypes=dtypes, gpu_dry_run=True)
    if report.passed and dtypes == ["float32"] != every:  # a wrong file float32 accepts: the low-precision ones now
        dtypes = [d for d in every if d != "float32"]
        report = grader.grade(spec, path, seed=SEED[pid], dtypes=dtypes, gpu_dry_run=True)
    assert report.dtypes == dtypes
    assert report.verdict.value == expected_verdict(path), (report.message, report.seed)
    if not report.passed:
        assert report.message, "a rejection must say what is wrong"
    else:  # a correct alternative runs on a GPU too (GPU.md: keys_outer_loop made a tensor on the CPU there)
        assert not report.advice, report.advice


def right_dtypes(spec, path) -> list[str]:
    """float32 and one of the low-precision dtypes a problem declares, taken in turn by its correct alternatives (so
    each dtype grades half of them; the reference is graded in all, below): a third of the corpus's time went to
    grading each in both. Every declared dtype under TORCHCODE_TEST_SEEDS=random, as in `validate` and on a GPU."""
    every = list(spec.grading.dtypes)
    low = [d for d in every if d != "float32"]
    if len(low) < 2 or os.environ.get("TORCHCODE_TEST_SEEDS") == "random":
        return every
    return ["float32", low[spec.variants("right").index(path) % len(low)]]


@pytest.mark.parametrize("pid", [s.id for s in CATALOG.ordered()])
def test_reference_accepted_on_several_seeds(grader, pid):
    """Seed 0 in every declared dtype, as a GPU grades, and the seed its variants are graded on (whose cases are
    built already; a third seed cost minimind_attention a quarter of a minute). (The reference's GPU dry run is
    `validate`'s: test_authoring's test_validate_every_builtin_problem; many seeds: benchmarks/seed_sweep.py.)"""
    spec = CATALOG.get(pid)
    for seed in (0, SEED[pid]):
        dtypes = list(spec.grading.dtypes) if seed == 0 else ["float32"]
        report = grader.grade(spec, spec.solution_path, seed=seed, dtypes=dtypes)
        assert report.passed, (seed, report.message)


@pytest.mark.parametrize("pid", [s.id for s in CATALOG.ordered()])
def test_stub_is_not_implemented(grader, pid, tmp_path):
    from torchcode.scaffold import render_stub

    stub = tmp_path / f"{pid}.py"
    stub.write_text(render_stub(CATALOG.get(pid)))
    report = grader.grade(CATALOG.get(pid), stub, seed=SEED[pid])
    assert report.verdict.value == "not_implemented", report.message


def test_variant_files_live_in_the_source_tree():
    assert all(str(p).startswith(str(ROOT)) for _, p in VARIANTS)


@pytest.mark.parametrize("seed,only,dtype", [(1774594912, "many_key_blocks", "float16"),
                                              (1469118510, "large_scores", "bfloat16")])
def test_row_factors_rounded_in_low_precision_are_not_a_lean(grader, seed, only, dtype):
    """A log-sum-exp merge computed in low precision scales each row by a rounded exp(lse - new_lse), several times:
    its gradients lean row by row (slice by slice, block by block) by up to 2.2 epsilons. These seeds rejected this
    kernel as leaning (CI; the seed sweep), when a part's lean failed at 2 epsilons."""
    spec = CATALOG.get("flash_attention")
    report = grader.grade(spec, FIXTURES / "lse_merge_in_low_precision.py", seed=seed, only=[only], dtypes=[dtype])
    assert report.passed, report.message


def test_a_gradient_that_vanishes_is_judged_on_the_scale_of_the_terms_that_cancel(grader, tmp_path):
    """A key bias's gradient is zero in exact arithmetic (softmax ignores a shift of a row's scores): a correct
    kernel that sums in another order leaves float32 noise of the cancelling terms' size there, which failed this
    correct variant on large inputs (1.5e-5 against an atol of 1e-5, seed 302174501; large_inputs now grades the
    forward only, so the gradients are judged here on every case that grades them). A gradient hook that adds 0.02 to
    that same gradient is still caught."""
    spec = CATALOG.get("cross_attention")
    path = spec.folder / "right" / "per_batch_loop.py"
    report = grader.grade(spec, path, seed=302174501, dtypes=["float32"])
    assert report.passed, report.message
    nudged = tmp_path / "nudged.py"
    nudged.write_text(path.read_text().replace("# expect: accepted", "# expect: wrong_answer").replace(
        "        self.W_o = nn.Linear(d_model, d_model)\n",
        "        self.W_o = nn.Linear(d_model, d_model)\n        self.W_k.bias.register_hook(lambda g: g + 0.02)\n"))
    assert "register_hook" in nudged.read_text()
    report = grader.grade(spec, nudged, seed=302174501, dtypes=["float32"])
    assert report.verdict.value == "wrong_answer" and "W_k.bias" in report.message, report.message


@pytest.mark.parametrize("seed", [1, 921004993])
def test_huge_own_scores_grade_only_the_first_token(grader, seed):
    """A correct kernel's bfloat16 rounding moves scores near 1e5 by hundreds: the rows that mix several such
    scores are not graded, only the first token's (its one visible score). These seeds rejected this correct
    variant before (CI, and the blind corpus's q folded with log2(e)/sqrt(d))."""
    spec = CATALOG.get("minimind_attention")
    path = spec.folder / "right" / "half_tables_complex.py"
    only = ["very_negative_own_score", "own_score_below_float16_range"]
    report = grader.grade(spec, path, seed=seed, only=only, dtypes=["float32", "bfloat16", "float16"])
    assert report.passed, report.message
    wrong = spec.folder / "wrong" / "fill_minus_1e4.py"
    report = grader.grade(spec, wrong, seed=seed, only=only, dtypes=["float32", "bfloat16", "float16"])
    assert report.verdict.value == "wrong_answer", report.message
    assert report.first_failure.name == "very_negative_own_score", report.first_failure.name
    assert "16 of 16 elements are off" in report.message and "positions" not in report.message, report.message


def test_dropout_without_its_rescale_is_told_to_keep_the_expectation(grader):
    """Two draws differ and p = 0 changes nothing, but the mean of many draws is half eval mode's output: told so,
    without the amounts of a yes/no check ("outputs differ by 1")."""
    spec = CATALOG.get("minimind_attention")
    report = grader.grade(spec, spec.folder / "wrong" / "dropout_not_rescaled.py", seed=corpus_seed(spec.id),
                          only=["dropout_keeps_expectation", "dropout_in_training_slow"])
    verdicts = {c.name: c.verdict.value for c in report.cases}
    assert verdicts == {"dropout_keeps_expectation": "wrong_answer", "dropout_in_training_slow": "accepted"}, verdicts
    assert "scale what it keeps by 1 / (1 - p)" in report.message and "differ by" not in report.message, report.message

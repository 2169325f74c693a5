"""Rejections of realistic wrong submissions say what to fix in the learner's terms, in every declared dtype."""

from __future__ import annotations

import pytest

from conftest import ROOT

PROBLEMS = ROOT / "problems"


def grade_all_dtypes(grader, catalog, pid, name):
    spec = catalog.get(pid)
    return grader.grade(spec, PROBLEMS / pid / "wrong" / f"{name}.py", dtypes=list(spec.grading.dtypes))


def test_a_detached_cache_is_named_as_a_gradient_only_bug(grader, catalog):
    report = grade_all_dtypes(grader, catalog, "kv_cache", "detached_cache")
    assert report.verdict.value == "wrong_answer", report.message
    bad = [c for c in report.cases if not c.passed]
    assert bad and all("gradient of" in c.message and "only the gradients are not" in c.message
                       and ".detach()" in c.message for c in bad), report.message


def test_a_dtype_mismatch_says_which_dtype_to_use(grader, catalog):
    report = grade_all_dtypes(grader, catalog, "sdpa", "bias_hardcoded_float16")
    assert report.verdict.value == "runtime_error", report.message
    assert "Two tensors of different dtypes" in report.message and "dtype=x.dtype" in report.message, report.message


def test_a_wrong_hand_written_backward_is_named(grader, catalog):
    report = grade_all_dtypes(grader, catalog, "repeat_kv", "function_grad_of_first_copy")
    assert report.verdict.value == "wrong_answer", report.message
    assert "only the gradients are not" in report.message and "torch.autograd.Function" in report.message, report.message


@pytest.mark.parametrize("pid,name,words", [
    ("cross_attention", "memory_projected_once", "another memory x_kv gave the same output"),
    ("mha", "keys_cached_by_shape", "other keys/values gave the same output"),
    ("mha", "functional_dropout", "F.dropout needs training=self.training"),
])
def test_state_or_randomness_across_calls_is_named(grader, catalog, pid, name, words):
    report = grade_all_dtypes(grader, catalog, pid, name)
    assert report.verdict.value == "wrong_answer", report.message
    assert any(words in c.message for c in report.cases if not c.passed), report.message


@pytest.mark.parametrize("pid,name,case", [
    ("flash_attention", "max_starts_at_zero", "all_scores_negative"),
    ("flash_attention", "tail_block_not_rescaled", "largest_in_ragged_block"),
    ("sdpa", "renormalise_after_softmax", "large_scores_masked"),
])
def test_numerics_bugs_are_caught_in_float32_alone(grader, catalog, pid, name, case):
    """Exact in exact arithmetic, so only a case whose scores make exp() underflow or overflow catches them."""
    report = grader.grade(catalog.get(pid), PROBLEMS / pid / "wrong" / f"{name}.py", dtypes=["float32"])
    bad = {c.name: c.message for c in report.cases if not c.passed}
    assert report.verdict.value == "wrong_answer" and case in bad, report.message
    assert "NaN/inf come from exp()" in bad[case]


@pytest.mark.parametrize("pid,name,words", [
    ("rope", "view_as_complex_of_input", "call .contiguous() before viewing them as complex numbers"),
    ("repeat_kv", "output_in_default_dtype", "keep the inputs' dtype"),
    ("causal_attention", "softmax_on_data", "no gradient of Q"),
    ("linear_attention", "reciprocal_normaliser", "if this case passes in float32, a step of your backward"),
    ("cross_attention", "memory_shared_across_batch", "attend within each batch element"),
])
def test_round_three_rejections_say_what_to_fix(grader, catalog, pid, name, words):
    """A view_as_complex on a transposed input, a float32 buffer for half-precision inputs, a softmax of .data, a
    gradient that only float16 gets wrong (which no .detach() explains), batch elements that read each other."""
    report = grade_all_dtypes(grader, catalog, pid, name)
    assert report.verdict.value != "accepted" and words in report.message, report.message


COMPILED = "import torch\nimport torch.nn.functional as F\n\n\n@torch.compile\ndef {name}({args}):\n    return {body}\n"


@pytest.mark.parametrize("pid,args,body,verdict", [
    ("sdpa", "Q, K, V, mask=None", "torch.softmax((Q @ K.transpose(-2, -1) / Q.shape[-1] ** 0.5).masked_fill("
     "~mask, float('-inf')) if mask is not None else Q @ K.transpose(-2, -1) / Q.shape[-1] ** 0.5, dim=-1) @ V",
     "accepted"),
    ("sdpa", "Q, K, V, mask=None", "F.scaled_dot_product_attention(Q, K, V, attn_mask=mask)", "forbidden_call"),
    ("flash_attention", "Q, K, V, block_size=32", "torch.softmax(Q @ K.transpose(1, 2) / Q.shape[-1] ** 0.5, -1) @ V",
     "too_much_memory"),
], ids=["right", "fused_kernel", "full_matrix"])
def test_torch_compile_is_graded_under_the_guards(grader, catalog, tmp_path, pid, args, body, verdict):
    """@torch.compile'd code was a runtime error (the compiler traced the grader's dispatch guard and was refused its
    source). Right code is accepted, and compiling a forbidden kernel or the full score matrix hides neither."""
    spec = catalog.get(pid)
    path = tmp_path / f"{pid}.py"
    path.write_text(COMPILED.format(name=spec.entry.name, args=args, body=body))
    only = {"sdpa": ["batched_3d", "padding_mask"], "flash_attention": ["even_blocks"]}[pid]
    report = grader.grade(spec, path, dtypes=["float32"], only=only)
    assert report.verdict.value == verdict, report.message

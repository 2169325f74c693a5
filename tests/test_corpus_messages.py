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
    ("repeat_kv", "output_in_default_dtype", "cast the result back with .to(x.dtype)"),
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


def _render(report) -> str:
    import io

    from rich.console import Console

    from torchcode.render.report import report as render

    con = Console(file=io.StringIO(), width=200, color_system=None)
    render(con, report, display_file="x.py")
    return con.file.getvalue()


def test_heads_in_the_wrong_order_are_named_and_dtypes_said_once(grader, catalog):
    """Tiled instead of grouped heads: every value is right, in the wrong place; the message says where. The
    cases failing alike in every dtype are named once each, not once per dtype."""
    spec = catalog.get("repeat_kv")
    report = grader.grade(spec, PROBLEMS / "repeat_kv" / "wrong" / "tiled.py", seed=1, dtypes=list(spec.grading.dtypes))
    assert report.verdict.value == "wrong_answer", report.message
    assert "right but in the wrong places along the head dimension (dimension 2, size 4): your head 1 holds what " \
           "head 2 should" in report.message, report.message
    text = _render(report)
    flat = " ".join(text.replace("│", " ").split())  # the panel wraps its text at the terminal's width
    assert "the wrong places along the head dimension" in flat and "(two_heads_twice, three_heads_four_times, odd_sizes" \
        in flat and " in float32, bfloat16 and float16)" in flat, text
    assert "two_heads_twice [bfloat16]" not in text.split("fail this way")[1], text
    assert "--seed 1 --dtype all`" in text, text  # reproduces every dtype


@pytest.mark.parametrize("pid,name,dtype,words", [
    ("sliding_window", "negative_slice_start", "float32",
     "Only positions 0, 1 (of 65) are wrong; positions 2..64 are right"),
    ("sdpa", "ignores_mask", "float32", "changing only the keys and values where mask is False changed your output"),
    ("sdpa", "mask_unsqueezed_after_batch", "float32",
     "The call was given Q [2, 5, 16], K [2, 7, 16], V [2, 7, 8], mask [5, 7] bool."),
    ("repeat_kv", "heads_first_layout", "float32",
     "output has shape [2, 10, 2, 8], expected [2, 5, 4, 8]. The call was given x [2, 5, 2, 8], n_rep=2."),
    ("repeat_kv", "output_in_default_dtype", "bfloat16", "expected torch.bfloat16: return the inputs' dtype"),
    ("causal_attention", "excludes_self", "float32",
     "where the expected value is finite (32 of 288 elements; only position 0 (of 9) is wrong; positions 1..8 are "
     "right)"),
    ("gqa", "tiled_kv_heads", "float32", "query heads 0 and 1 had identical queries but gave different outputs: they "
     "form one group and must share KV head 0"),
    ("mha", "split_without_transpose", "float32", "changing only head 1's part of the keys and values (features "
     "8..15, every projection the identity) changed other heads' outputs"),
    ("cross_attention", "heads_split_feature_major", "float32", "changing only head 1's part of the memory x_kv"),
    ("mha", "missing_output_projection", "float32", "W_o.weight got no gradient: your output does not depend on it"),
    ("linear_attention", "no_normaliser", "float32", "with every value row the same vector v, your output was not v "
     "at every query: each query's weights over the keys must sum to 1"),
    ("flash_attention", "no_sum_rescale", "float32", "rescale both the running sum and the accumulator"),
    ("mha", "softmax_over_queries", "float32", "your output was not b at every query: each query's weights must sum "
     "to 1 over the keys (the softmax over the last dim"),
    ("sdpa", "scale_by_dk", "float32", "padding Q and K with zero features (their width Dk -> 4 Dk, every dot product "
     "unchanged) should act exactly as halving the queries"),
    ("flash_attention", "missing_scale", "float32", "padding Q and K with zero features"),
    ("causal_attention", "softmax_dim_one", "float32", "or normalises over the queries (the softmax runs over the keys"),
    ("sliding_window", "positions_in_input_dtype", "bfloat16",
     "The wrong elements all lie at positions >= 257 (of 300); positions 0..256 are right"),
])
def test_the_message_says_where_and_on_what(grader, catalog, pid, name, dtype, words):
    """Which rows are wrong, which property a mask breaks, which inputs a crashing or misshapen call was given.
    (Only the case whose message is asserted is graded: each grade costs a tenth of a second.)"""
    report = grader.grade(catalog.get(pid), PROBLEMS / pid / "wrong" / f"{name}.py", seed=1, dtypes=[dtype],
                          only=[CASE[name]])
    assert report.verdict.value != "accepted" and words in report.message, report.message


CASE = {"negative_slice_start": "window_two", "ignores_mask": "padding_mask", "mask_unsqueezed_after_batch": "mask_2d",
        "heads_first_layout": "two_heads_twice", "output_in_default_dtype": "two_heads_twice",
        "excludes_self": "no_peeking", "tiled_kv_heads": "group_shares_kv_head",
        "split_without_transpose": "heads_are_separate", "heads_split_feature_major": "heads_are_separate",
        "missing_output_projection": "heads_are_separate", "no_normaliser": "weights_sum_to_one",
        "no_sum_rescale": "weights_sum_to_one", "softmax_over_queries": "weights_sum_to_one", "scale_by_dk": "scale_follows_key_width",
        "missing_scale": "scale_follows_head_width", "softmax_dim_one": "no_peeking",
        "positions_in_input_dtype": "long_sequence_positions"}


def test_the_stub_says_not_implemented_yet_and_nothing_else(grader, catalog, tmp_path):
    from torchcode.scaffold import render_stub

    stub = tmp_path / "repeat_kv.py"
    stub.write_text(render_stub(catalog.get("repeat_kv")))
    report = grader.grade(catalog.get("repeat_kv"), stub, dtypes=["float32", "bfloat16"])
    assert report.verdict.value == "not_implemented"
    assert report.message.startswith("not implemented yet") and "`torchcode hint repeat_kv`" in report.message
    text = _render(report)
    assert "not implemented yet" in text and "fail this way" not in text and "Case " not in text, text


def test_a_failure_only_low_precision_shows_says_so():
    """Float32 passes the same case (or, for a case that runs in low precision only, its run once more in float32):
    the message says the failure is about precision, and what to do; a case failing in float32 too, a case whose
    targets name the dtype already, and a runtime error are left alone. A low-precision-only case is no evidence by
    itself: without a float32 run it is left alone, and one whose float32 run fails too says it is a plain error."""
    from torchcode.grader.cases import CaseDef
    from torchcode.grader.judge import _say_precision
    from torchcode.grader.result import CaseResult, Verdict

    one = CaseDef("one", "", lambda rng: None)
    two = CaseDef("two", "", lambda rng: None)
    low = CaseDef("low", "positions past 256 in bfloat16", lambda rng: None, dtypes=("bfloat16",))
    defs = [(one, "float32"), (two, "float32"), (one, "float16"), (two, "float16"), (one, "bfloat16"),
            (low, "bfloat16"), (CaseDef("only16", "", lambda rng: None, dtypes=("float16",)), "float16")]
    cases = [CaseResult("one", Verdict.ACCEPTED), CaseResult("two", Verdict.WRONG_ANSWER, message="off."),
             CaseResult("one [float16]", Verdict.WRONG_ANSWER, message="output does not match the reference."),
             CaseResult("two [float16]", Verdict.WRONG_ANSWER, message="off."),
             CaseResult("one [bfloat16]", Verdict.RUNTIME_ERROR, message="boom"),
             CaseResult("low [bfloat16]", Verdict.WRONG_ANSWER, message="off."),
             CaseResult("only16 [float16]", Verdict.WRONG_ANSWER, message="off.")]
    alone = [CaseResult("only16 [float16]", Verdict.WRONG_ANSWER, message="off.") for _ in range(2)]
    _say_precision(alone[:1], defs[-1:])  # no float32 run: no evidence
    assert alone[0].message == "off."
    _say_precision(alone[1:], defs[-1:], {"only16": False})
    assert alone[1].message.startswith("off. This case runs in float16 only, but it fails in float32 too"), alone[1]
    assert "loses" not in alone[1].message
    _say_precision(cases, defs, {"only16": True})
    assert cases[2].message.startswith("output does not match the reference. Float32 passes this case and float16 "
                                       "fails it: a step of yours loses float16's precision or range"), cases[2].message
    assert "accumulate long sums and the softmax in float32" in cases[2].message
    assert cases[6].message.startswith("off. This case runs in float16 only, and float32 passes it when run once more "
                                       "to tell: a step of yours loses float16's"), cases[6].message
    assert [c.message for c in (cases[1], cases[3], cases[4], cases[5])] == ["off.", "off.", "boom", "off."]


def test_where_without_dimension_names():
    """A pack whose cases.py gives no DIMS: the message counts dimensions; most wrong names the few right ones."""
    import torch

    from torchcode.grader.compare import where

    bad = torch.zeros(2, 9, 4, dtype=torch.bool)
    bad[:, 3:5] = True
    assert where(bad) == "only indices 3, 4 of dimension 1 (size 9) are wrong; indices 0..2, 5..8 are right"
    assert where(~bad, ("position", "feature")) == "only positions 3, 4 (of 9) are right; positions 0..2, 5..8 are wrong"
    assert where(torch.ones(2, 9, dtype=torch.bool)) == ""


def test_where_calls_ungraded_indices_neither_right_nor_wrong():
    import torch

    from torchcode.grader.compare import where

    bad, keep = torch.zeros(2, 6, dtype=torch.bool), torch.ones(2, 6, dtype=torch.bool)
    bad[:, 1], keep[:, 3:] = True, False  # positions 3..5 are not graded (Call.ungraded)
    assert where(bad, ("position",), keep) == "only position 1 (of 6) is wrong; positions 0, 2 are right"
    assert where(bad | ~keep, ("position",), keep) == "only position 1 (of 6) is wrong; positions 0, 2 are right"
    bad[:, 0], bad[:, 2] = True, True  # every graded position wrong: nothing to say about where
    assert where(bad, ("position",), keep) == ""

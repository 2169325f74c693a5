"""The grader's generic mechanisms against classes of wrong code the hidden cases were not written
for: fresh instances, inputs left unchanged, memory layouts, hidden state across cases.

tests/fixtures/mechanism_pack holds a small KV-cache problem whose variants exercise them; the
built-in problems' own variants (tests/test_variants.py) and the hostile corpus do the rest.
"""

from __future__ import annotations

import json
import shutil

import pytest

from conftest import FIXTURES, ROOT, expected_verdict
from torchcode.catalog import load_catalog

PACK = FIXTURES / "mechanism_pack"
MECH = load_catalog([PACK], builtin=False)
VARIANTS = [(s.id, p) for s in MECH.ordered() for kind in ("wrong", "right") for p in s.variants(kind)]


@pytest.mark.parametrize("pid,path", VARIANTS, ids=[f"{p}/{f.parent.name}/{f.stem}" for p, f in VARIANTS])
def test_mechanism_variant_gets_intended_verdict(grader, pid, path):
    report = grader.grade(MECH.get(pid), path)
    assert report.verdict.value == expected_verdict(path), (report.message, report.seed)


def test_mechanism_pack_validates(cli):
    r = cli("validate", "--problems-dir", str(PACK), "--seeds", "2")
    assert r.code == 0, r.out


def test_fresh_instance_exposes_history_kept_on_self(grader):
    path = PACK / "problems" / "cached_layer" / "wrong" / "keeps_history_on_self.py"
    report = grader.grade(MECH.get("cached_layer"), path)
    bad = {c.name: c for c in report.cases if not c.passed}
    assert "fresh_instance" in bad and "prefill" not in bad, report.message
    assert "use the cache you are given, not state kept on self" in bad["fresh_instance"].message


def test_an_input_changed_in_place_is_named_by_the_contract(grader, catalog):
    """Right values, but the caller's mask inverted in place: rejected, naming the input."""
    report = grader.grade(catalog.get("sdpa"), catalog.get("sdpa").folder / "wrong" / "flips_mask_in_place.py")
    assert report.verdict.value == "wrong_answer"
    masked = [c for c in report.cases if not c.passed]
    assert masked and all("modified its input `mask` in place" in c.message for c in masked), report.message


def test_a_returned_cache_written_later_is_named(grader):
    path = PACK / "problems" / "cached_layer" / "wrong" / "static_buffer_when_no_grad.py"
    report = grader.grade(MECH.get("cached_layer"), path)
    bad = {c.name: c.message for c in report.cases if not c.passed}
    assert list(bad) == ["branches"], bad
    assert "`output[1][0]`, which your call 2 returned, was changed in place during call 3" in bad["branches"]


MODULE_BODY = """
import torch
from torch import nn
class {cls}(nn.Module):
    def __init__({init}):
        super().__init__()
        raise NotImplementedError
    def forward({fwd}):
        raise NotImplementedError
"""


@pytest.mark.parametrize("pid,source,verdict,words", [
    # names passed by position are the learner's; the arity is not
    ("sdpa", "def scaled_dot_product_attention(q, k, v, mask=None):\n    raise NotImplementedError",
     "not_implemented", []),
    ("sdpa", "def scaled_dot_product_attention(Q, K, V, attn_mask=None):\n    raise NotImplementedError",
     "bad_interface", ["must take (Q, K, V, mask=...)", "passed by keyword with exactly these names"]),
    ("sdpa", "def scaled_dot_product_attention(Q, K, V, mask=None, /):\n    raise NotImplementedError",
     "bad_interface", ["must accept `mask` by keyword"]),
    # optional parameters may be passed by position too (the contract's signature allows it)
    ("sdpa", "def scaled_dot_product_attention(Q, K, V, *, mask=None):\n    raise NotImplementedError",
     "bad_interface", ["must accept `mask` by position too", "callers may write (Q, K, V, mask)"]),
    ("rope", "def apply_rope(q, k, *args, base=10000.0):\n    raise NotImplementedError",
     "bad_interface", ["must accept `base` by position too", "move `base` before them"]),
    ("linear_attention", "def linear_attention(Q, K, V, **options):\n    raise NotImplementedError",
     "bad_interface", ["must accept `eps` by position too", "only by keyword, through `**`"]),
    ("linear_attention", "import functools\ndef _la(Q, K, V, eps=1e-5):\n    raise NotImplementedError\n"
     "linear_attention = functools.partial(_la, eps=1e-6)\n", "bad_interface",
     ["must accept `eps` by position too"]),  # a partial's keyword makes it keyword-only: f(Q, K, V, 1e-6) raises
    ("minimind_attention", MODULE_BODY.format(cls="Attention", init="self, args", fwd=(
        "self, x, pos, past_key_value=None, *, use_cache=False, attention_mask=None")), "bad_interface",
     ["`Attention.forward` must accept `use_cache` by position too",
      "(x, position_embeddings, past_key_value, use_cache)"]),
    ("sliding_window", "def sliding_window_attention(Q, K, V):\n    raise NotImplementedError",
     "bad_interface", ["must take (Q, K, V, window_size)", "yours is sliding_window_attention(Q, K, V)"]),
    ("mha", MODULE_BODY.format(cls="MultiHeadAttention", init="self, d_model", fwd="self, Q, K, V"),
     "bad_interface", ["`MultiHeadAttention.__init__` must take (d_model, num_heads)"]),
    ("mha", MODULE_BODY.format(cls="MultiHeadAttention", init="self, dim, heads", fwd="self, q, k, v"),
     "not_implemented", []),
    ("kv_cache", MODULE_BODY.format(cls="KVCacheAttention", init="self, d_model, num_heads", fwd="self, x, cache"),
     "bad_interface", ["`cache` must be optional", "give it a default"]),
    ("kv_cache", MODULE_BODY.format(cls="KVCacheAttention", init="self, d_model, num_heads", fwd="self, x, kv=None"),
     "bad_interface", ["must take (x, cache=...)"]),
    ("minimind_attention", MODULE_BODY.format(cls="Attention", init="self, args", fwd=(
        "self, x, pos, past_key_value=None, use_cache=False, attention_mask=None")), "not_implemented", []),
    ("minimind_attention", MODULE_BODY.format(cls="Attention", init="self, args", fwd=(
        "self, x, pos, past_kv=None, use_cache=False, attention_mask=None")), "bad_interface",
     ["must take (x, position_embeddings, past_key_value=..., use_cache=..., attention_mask=...)"]),
    ("minimind_attention", MODULE_BODY.format(cls="Attention", init="self", fwd="self, x, pos"),
     "bad_interface", ["`Attention.__init__` must take (config)"]),
])
def test_positional_names_are_free_keyword_names_are_the_contract(grader, catalog, tmp_path, pid, source, verdict,
                                                                  words):
    path = tmp_path / f"{pid}.py"
    path.write_text(source)
    report = grader.grade(catalog.get(pid), path)
    assert report.verdict.value == verdict, report.message
    for w in words:
        assert w in report.message, (w, report.message)


def test_inputs_arrive_in_varied_memory_layouts(grader, catalog, tmp_path):
    """In every check half the cases get contiguous inputs, the others transposed, padded or permuted ones."""
    path = tmp_path / "sdpa.py"
    path.write_text((catalog.get("sdpa").solution_path).read_text() + (
        "\n_ref = scaled_dot_product_attention\n\n"
        "def scaled_dot_product_attention(Q, K, V, mask=None):\n"
        "    if not (Q.is_contiguous() and K.is_contiguous() and V.is_contiguous()):\n"
        "        raise RuntimeError('not contiguous')\n"
        "    return _ref(Q, K, V, mask)\n"))
    contiguous = set()
    for seed in range(4):
        report = grader.grade(catalog.get("sdpa"), path, seed=seed)
        ok = [c.name for c in report.cases if c.passed]
        assert len(ok) == len(report.cases) // 2, [(c.name, c.verdict.value) for c in report.cases]
        contiguous.update(ok)
        assert all("not contiguous" in c.message for c in report.cases if not c.passed)
    assert len(contiguous) > len(report.cases) // 2  # which cases stay contiguous depends on the seed


def test_view_on_a_non_contiguous_input_says_to_reshape(grader, catalog):
    report = grader.grade(catalog.get("sdpa"), catalog.get("sdpa").folder / "wrong" / "flattens_batch_with_view.py")
    assert report.verdict.value == "runtime_error"
    assert "Use .reshape(...) instead of .view(...), or call .contiguous() first" in report.message


def test_a_fill_float16_cannot_hold_says_what_to_fill_with(grader, catalog, tmp_path):
    """masked_fill(mask == 0, -1e9) (The Annotated Transformer's) raises in float16: the message says why and the fix."""
    path = tmp_path / "sdpa.py"
    path.write_text((ROOT / "solutions" / "sdpa.py").read_text().replace('masked_fill(~mask, float("-inf"))',
                                                                          "masked_fill(mask == 0, -1e9)"))
    report = grader.grade(catalog.get("sdpa"), path, seed=0, dtypes=["float16"], only=["padding_mask"])
    assert report.verdict.value == "runtime_error", report.message
    assert "does not fit this dtype" in report.message and "float('-inf') or torch.finfo" in report.message, report.message


def test_a_case_runs_only_in_the_dtypes_it_names(grader, catalog):
    """causal_attention's score of -100000 cannot be held in float16: that case runs in float32 (and bfloat16) only."""
    spec = catalog.get("causal_attention")
    report = grader.grade(spec, spec.solution_path, seed=0, dtypes=["float32", "float16"])
    assert report.passed, report.message
    names = [c.name for c in report.cases]
    assert "own_score_below_float16_range" in names and "own_score_below_float16_range [float16]" not in names
    assert "very_negative_own_score [float16]" in names  # the others run in every dtype


KEYS_UP_TO_200 = """
import math
import torch


def flash_attention(Q, K, V, block_size=32):
    B, S, D = Q.shape
    f32 = torch.promote_types(Q.dtype, torch.float32)
    m = torch.full((B, S, 1), float("-inf"), dtype=f32, device=Q.device)
    l = torch.zeros(B, S, 1, dtype=f32, device=Q.device)
    acc = torch.zeros(B, S, D, dtype=f32, device=Q.device)
    for ks in range(0, 200 if S == 256 else S, block_size):  # a buffer made for 200 tokens, used at exactly 256
        s = (Q @ K[:, ks:ks + block_size].transpose(1, 2)).to(f32) / math.sqrt(D)
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        p, alpha = torch.exp(s - m_new), torch.exp(m - m_new)
        l = alpha * l + p.sum(-1, keepdim=True)
        acc = alpha * acc + p @ V[:, ks:ks + block_size].to(f32)
        m = m_new
    return (acc / l).to(Q.dtype)
"""


def test_a_low_precision_only_case_tells_precision_from_a_plain_error(grader, catalog, tmp_path):
    """flash_attention's many-small-tiles case runs in bfloat16 only (its targets speak of bfloat16's rounding step),
    and it alone has 256 keys. A plain error it alone shows (keys past 200 never visited at S=256) fails in float32
    too when run once more: the message says it is no matter of precision. Statistics kept in bfloat16 pass in float32:
    nothing of the kind is said."""
    spec = catalog.get("flash_attention")
    path = tmp_path / "flash_attention.py"
    path.write_text(KEYS_UP_TO_200)
    only = ["many_small_tiles_bfloat16"]
    report = grader.grade(spec, path, seed=0, dtypes=["float32", "bfloat16"])
    assert report.verdict.value == "wrong_answer", report.message
    assert [c.name for c in report.cases if not c.passed] == ["many_small_tiles_bfloat16 [bfloat16]"], report.message
    assert "fails in float32 too (run once more to tell): not a matter of bfloat16's precision" in report.message
    report = grader.grade(spec, spec.folder / "wrong" / "statistics_in_input_dtype.py", seed=0, only=only,
                          dtypes=["bfloat16"])
    assert report.verdict.value == "wrong_answer" and "float32 too" not in report.message, report.message


def test_cases_run_in_a_seeded_order_and_are_reported_in_definition_order(grader):
    """A band cached by length: whichever same-length case runs second fails, and the message says why."""
    path = PACK / "problems" / "banded" / "wrong" / "band_cached_by_length.py"
    spec = MECH.get("banded")
    failing = set()
    for seed in (0, 1):  # window_three runs before window_one with seed 0, after it with seed 1
        report = grader.grade(spec, path, seed=seed)
        assert [c.name for c in report.cases] == ["window_one", "window_three", "window_two"]
        bad = [c for c in report.cases if not c.passed]
        assert len(bad) == 1 and "your code keeps state between calls" in bad[0].message, report.message
        assert "passes when it runs first in a fresh process" in bad[0].message
        failing.add(bad[0].name)
    assert failing == {"window_one", "window_three"}


def test_replay_with_new_values_exposes_a_cache_keyed_by_shape(grader, catalog):
    spec = catalog.get("gqa")
    # one case alone: its first run is clean, so only the replay (new values, same shapes) can expose the cache
    # (the problem's own same-shape cases catch it too; they are not what this test is about)
    report = grader.grade(spec, spec.folder / "wrong" / "kv_weights_cached_by_shape.py", seed=3, only=["grouped_8_2"])
    bad = [c for c in report.cases if not c.passed]
    assert len(bad) == 1 and bad[0].replay, [(c.name, c.verdict.value) for c in report.cases]
    assert bad[0].message.startswith("your code gave a different answer for the same shapes with new values: do you "
                                     "keep results or tables from an earlier call, keyed only by shape")
    assert report.to_dict()["cases"][[c.name for c in report.cases].index(bad[0].name)]["replay"] is True


GQA_WITHOUT_SCALE = """
import torch
from torch import nn


class GroupQueryAttention(nn.Module):
    def __init__(self, d_model, num_heads, num_kv_heads):
        super().__init__()
        self.h, self.kv, self.dk = num_heads, num_kv_heads, d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, num_kv_heads * self.dk)
        self.W_v = nn.Linear(d_model, num_kv_heads * self.dk)
        self.W_o = nn.Linear(d_model, d_model)

    def forward(self, x):
        B, S, D = x.shape
        q = self.W_q(x).reshape(B, S, self.h, self.dk).transpose(1, 2)
        k = self.W_k(x).reshape(B, S, self.kv, self.dk).transpose(1, 2).repeat_interleave(self.h // self.kv, 1)
        v = self.W_v(x).reshape(B, S, self.kv, self.dk).transpose(1, 2).repeat_interleave(self.h // self.kv, 1)
        w = torch.softmax(q @ k.transpose(-2, -1), -1)  # the 1/sqrt(d_k) scale forgotten
        return self.W_o((w @ v).transpose(1, 2).reshape(B, S, D))
"""


def test_report_explains_the_case_that_names_the_bug(cli, workdir, grader, catalog):
    """A scale forgotten fails nearly every case: the panel explains a plain case and says the mistake is
    shared, not the grouping case listed first; every failing case shows its own message. (The reports are
    graded here, as `check --json` would print them; the panel is drawn by the real command, on the same seed.)"""
    (workdir / "gqa.py").write_text(GQA_WITHOUT_SCALE)
    report = grader.grade(catalog.get("gqa"), workdir / "gqa.py", seed=7).to_dict()
    assert report["verdict"] == "wrong_answer" and report["explained"] == "mha_extreme", report["explained"]
    assert report["message"] == next(c["message"] for c in report["cases"] if c["name"] == "mha_extreme")
    r = cli("check", "gqa.py", "--problem", "gqa", "--seed", "7")
    flat = " ".join(r.out.replace("│", " ").split())  # the panel wraps its text at the terminal's width
    assert "Case mha_extreme" in flat and "look for a mistake they share" in flat, r.out
    failing = [c for c in report["cases"] if c["verdict"] != "accepted"]
    assert r.out.count("elements off, max abs err") == len(failing) > 1
    # a mistake only some cases show: the one whose property names it
    tiled = catalog.get("gqa").folder / "wrong" / "tiled_kv_heads.py"
    report = grader.grade(catalog.get("gqa"), tiled, seed=7).to_dict()
    assert report["verdict"] == "wrong_answer" and report["explained"] == "group_shares_kv_head", report["explained"]
    assert report["message"].startswith("query heads 0 and 1 had identical queries"), report["message"]


def test_report_explains_a_first_run_failure_before_new_values_that_fail_anywhere():
    """A case whose first values happened to pass and whose new values fail in a fresh process too (a window
    slice one short, unseen while the missing key's weight was negligible) is a plain mismatch, not advice:
    the report explains a case that failed on its first values, whose targets name the bug. New values that
    pass in a fresh process (state, proven) are still advice and explained first."""
    from torchcode.grader.result import FAILS_WITH_NEW_VALUES, CaseResult, Mismatch, Report, Verdict

    def failing(name, message, replay=False):
        m = Mismatch("output", [2, 4], 1.0, 1.0, [0, 0], 1.0, 0.0, 1e-5, 3, 8)
        return CaseResult(name, Verdict.WRONG_ANSWER, message=message, mismatch=m, replay=replay)

    values = failing("large_scores", FAILS_WITH_NEW_VALUES + "output does not match the reference", replay=True)
    plain = failing("window_two", "output does not match the reference")
    ok = CaseResult("window_zero", Verdict.ACCEPTED)
    report = Report(problem="sliding_window", file="f.py", verdict=Verdict.WRONG_ANSWER, seed=1,
                    cases=[values, ok, plain, CaseResult("single", Verdict.ACCEPTED)])
    assert report.explained is plain
    tiny = failing("one_pair", FAILS_WITH_NEW_VALUES + "output does not match the reference", replay=True)
    tiny.mismatch.total = 2  # the smallest, but its first values passed
    report.cases = [plain, tiny, failing("basic", "output does not match the reference")]
    assert report.explained is plain  # every case fails: the smallest that failed on its first values
    state = failing("bases_share_shapes", "your code gave a different answer for the same shapes", replay=True)
    report.cases = [plain, ok, state, CaseResult("single", Verdict.ACCEPTED)]
    assert report.explained is state


def test_case_weights_are_loaded_by_name_and_a_wrong_name_is_the_authors_error(catalog):
    """A case may choose some parameters (kv_cache's very_negative_own_score: scores of a known size and sign); the
    rest are drawn. A name or shape the reference does not have is a spec error that names the case and the fix."""
    import torch

    from torchcode.errors import SpecError
    from torchcode.grader.cases import Call, Case, CaseDef
    from torchcode.grader.problem import Problem

    problem = Problem(catalog.get("kv_cache"))
    prep = problem.build(next(d for d in problem.cases if d.name == "very_negative_own_score"), seed=3)
    assert prep is not None and prep.gold  # the reference ran with them
    for weights, words in (({"W_q.wieght": torch.eye(8)}, "no such parameter"),
                           ({"W_q.weight": torch.eye(4)}, "shape [8, 8]"),
                           ({"W_q.weight": [[1.0] * 8] * 8}, "as list, not a tensor")):
        bad = CaseDef("odd_weights", "", lambda rng, w=weights: Case(
            init=dict(d_model=8, num_heads=2), steps=[Call(rng.randn(1, 3, 8))], weights=w))
        with pytest.raises(SpecError) as e:
            problem.build(bad, seed=3)
        assert "case 'odd_weights'" in str(e.value) and words in str(e.value), str(e.value)


def test_json_report_only_gains_fields(cli, workdir, catalog):
    (workdir / "gqa.py").write_text(GQA_WITHOUT_SCALE)
    report = json.loads(cli("check", "gqa.py", "--problem", "gqa", "--json").out)
    assert {"problem", "file", "verdict", "passed", "seed", "cases", "cases_passed", "cases_total", "seconds",
            "load_seconds", "output", "sha256", "limits", "message", "explained"} <= set(report)
    assert {"name", "verdict", "targets", "message", "mismatch", "traceback", "seconds", "replay"} <= set(
        report["cases"][0])


def test_a_sibling_is_built_only_for_module_problems_and_its_names_are_checked(catalog):
    """Case(sibling=...) builds another instance beside the case's own (a model's other layer), so a setting kept on
    the class shows; a function problem has no instance to build, and a typo in its arguments is the author's."""
    from torchcode.errors import SpecError
    from torchcode.grader.cases import Call, Case, CaseDef
    from torchcode.grader.problem import Problem

    fn = Problem(catalog.get("sdpa"))
    bad = CaseDef("with_sibling", "", lambda rng: Case(
        steps=[Call(rng.randn(2, 3), rng.randn(2, 3), rng.randn(2, 3))], sibling=dict(d_model=8)))
    with pytest.raises(SpecError) as e:
        fn.build(bad, seed=3)
    assert "case 'with_sibling'" in str(e.value) and "only module problems" in str(e.value), str(e.value)

    mod = Problem(catalog.get("mha"))
    typo = CaseDef("typo", "", lambda rng: Case(
        init=dict(d_model=8, num_heads=2), steps=[Call(*(rng.randn(1, 3, 8) for _ in range(3)))],
        sibling=dict(d_model=8, num_head=4)))
    with pytest.raises(SpecError) as e:
        mod.build(typo, seed=3)
    assert "`num_head=`" in str(e.value) and "num_heads" in str(e.value), str(e.value)
    good = CaseDef("good", "", lambda rng: Case(
        init=dict(d_model=8, num_heads=2), steps=[Call(*(rng.randn(1, 3, 8) for _ in range(3)))],
        sibling=dict(d_model=8, num_heads=4)))
    assert mod.build(good, seed=3).gold  # the reference ran beside its sibling


KEYWORD_ONLY_BEHIND_WRAPS = '''import functools
import math

import torch


def keyword_options(fn):
    @functools.wraps(fn)  # the signature read is fn's (mask by position), the one called takes it by keyword only
    def wrapper(Q, K, V, **options):
        return fn(Q, K, V, **options)
    return wrapper


@keyword_options
def scaled_dot_product_attention(Q, K, V, mask=None):
    s = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return torch.softmax(s, dim=-1) @ V
'''


def test_a_replay_that_fails_says_how_it_passed_the_optional_parameters(grader, catalog, tmp_path):
    """A case's replay passes its optional parameters the other way from its first run: a wrapper that takes `mask`
    by keyword only passed the first run (by keyword) and failed the replay (by position), which was worded as if
    the new values alone made it fail."""
    path = tmp_path / "wrapped.py"
    path.write_text(KEYWORD_ONLY_BEHIND_WRAPS)
    report = grader.grade(catalog.get("sdpa"), path, seed=1, only=["masks_share_shapes"])
    (case,) = report.cases
    assert case.replay and not case.passed, (case.replay, case.message)
    assert "and with `mask` passed by position (the first run passed it by keyword)" in case.message, case.message
    # no frame of the file's own: the error line alone, not the grader's line that made the call
    assert "TypeError" in case.traceback and "torchcode" not in case.traceback, case.traceback


SDPA_WRONG_UNDER_NO_GRAD = '''import math

import torch


def scaled_dot_product_attention(Q, K, V, mask=None):
    s = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    out = torch.softmax(s, dim=-1) @ V
    return out if torch.is_grad_enabled() else out * 1.01  # an "inference path" that is off by 1%
'''


def test_forward_only_cases_call_under_no_grad(grader, catalog, tmp_path):
    """A case that grades no gradient calls as inference does, under torch.no_grad(): code wrong only with autograd
    off fails exactly those cases (and the reference, run the same way, is unaffected)."""
    from torchcode.grader.problem import Problem

    path = tmp_path / "sdpa.py"
    path.write_text(SDPA_WRONG_UNDER_NO_GRAD)
    report = grader.grade(catalog.get("sdpa"), path, seed=5)
    assert report.verdict.value == "wrong_answer"
    problem = Problem(catalog.get("sdpa"))
    forward_only = {d.name for d in problem.cases if not d.make(5).grad}
    failed = {c.name for c in report.cases if not c.passed}  # a replay runs as its case's first run did
    assert forward_only and failed == forward_only, (failed, forward_only)


def test_alias_hands_one_tensor_object_twice(grader, catalog):
    """mha's self_attention passes one tensor as Q, K and V (Alias): a shortcut taken when Q is K is V is graded there,
    and only there; its gradient is named for all three."""
    from torchcode.grader.problem import Problem

    mha = catalog.get("mha")
    report = grader.grade(mha, mha.folder / "wrong" / "fused_path_splits_qkv_wrongly.py", seed=2)
    assert {c.name for c in report.cases if not c.passed} == {"self_attention", "self_attention_weights_updated_inference"}, \
        report.message
    prep = Problem(mha).build(next(d for d in Problem(mha).cases if d.name == "self_attention"), seed=2)
    assert prep.leaf_labels == ["Q (the same tensor passed as K and V)"], prep.leaf_labels
    report = grader.grade(mha, mha.folder / "wrong" / "fused_kv_halves_swapped.py", seed=2)  # layer(q, mem, mem)
    assert {c.name for c in report.cases if not c.passed} == {"same_shapes_other_values", "inputs_freed_between_calls",
                                                              "weights_updated_between_calls"}, report.message


def test_updated_weights_reach_the_layer_between_calls(grader, catalog):
    """Call(...).updated({...}) overwrites parameters in place before that call (an optimizer step): a layer that
    kept a fused copy of its first weights fails that case alone."""
    mha = catalog.get("mha")
    report = grader.grade(mha, mha.folder / "wrong" / "fused_weights_kept_from_first_call.py", seed=4)
    assert {c.name for c in report.cases if not c.passed} == {"weights_updated_between_calls",
                                                              "self_attention_weights_updated_inference"}, report.message
    assert "output of call 2" in report.message


def test_updated_is_for_forward_only_cases_of_module_problems(catalog):
    """A function has no weights, and a training step runs backward before it changes them: anything else is the
    author's error, as are names and shapes the reference does not have."""
    import torch

    from torchcode.errors import SpecError
    from torchcode.grader.cases import Call, Case, CaseDef
    from torchcode.grader.problem import Problem

    mha = Problem(catalog.get("mha"))
    x = lambda rng: rng.randn(1, 3, 8)  # noqa: E731
    for name, build, words in (
            ("with_grad", lambda rng: Case(init=dict(d_model=8, num_heads=2), steps=[
                Call(x(rng), x(rng), x(rng)), Call(x(rng), x(rng), x(rng)).updated({"W_q.weight": torch.eye(8)})]),
             "grad=False"),
            ("typo", lambda rng: Case(init=dict(d_model=8, num_heads=2), grad=False, steps=[
                Call(x(rng), x(rng), x(rng)), Call(x(rng), x(rng), x(rng)).updated({"W_q.wieght": torch.eye(8)})]),
             "updates 'W_q.wieght' before call 2")):
        with pytest.raises(SpecError) as e:
            mha.build(CaseDef(name, "", build), seed=3)
        assert f"case '{name}'" in str(e.value) and words in str(e.value), str(e.value)
    fn = Problem(catalog.get("sdpa"))
    with pytest.raises(SpecError) as e:
        fn.build(CaseDef("fn", "", lambda rng: Case(grad=False, steps=[
            Call(x(rng), x(rng), x(rng)).updated({"W_q.weight": torch.eye(8)})])), seed=3)
    assert "case 'fn'" in str(e.value) and "only module problems" in str(e.value), str(e.value)


def test_a_fresh_instance_after_an_update_gets_the_updated_weights():
    """An optimizer step changes the weights every later layer is built with: .fresh() after .updated() is too."""
    import torch

    from torchcode.grader import execute

    class Sum(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(4))

        def forward(self, x):
            return x + self.w.sum()

    x = torch.zeros(1)
    prog = execute.Program(init={}, state={"w": torch.zeros(4)}, steps=[((x,), {})] * 4, grad=False, inference=True,
                           fresh=frozenset({2}), updates={1: {"w": torch.ones(4)}, 3: {"w": torch.full((4,), 2.0)}})
    ex = execute.run(Sum, True, prog, execute.Stage())
    assert [float(o) for o in ex.outputs] == [0.0, 4.0, 4.0, 8.0]
    assert not any(o.requires_grad for o in ex.outputs)  # inference: under torch.no_grad()


SDPA_SPARSE_DV = """import math

import torch


class _Attn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, Q, K, V):
        p = torch.softmax(Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1]), dim=-1)
        ctx.save_for_backward(Q, K, V, p)
        return p @ V

    @staticmethod
    def backward(ctx, g):
        Q, K, V, p = ctx.saved_tensors
        dp = g @ V.transpose(-2, -1)
        ds = p * (dp - (dp * p).sum(-1, keepdim=True)) / math.sqrt(Q.shape[-1])
        return ds @ K, ds.transpose(-2, -1) @ Q, (p.transpose(-2, -1) @ g).to_sparse()


def scaled_dot_product_attention(Q, K, V, mask=None):
    if mask is not None:
        raise NotImplementedError
    return _Attn.apply(Q, K, V)
"""


def test_a_gradient_that_cannot_be_sent_is_named(grader, catalog, tmp_path):
    path = tmp_path / "sdpa.py"
    path.write_text(SDPA_SPARSE_DV)
    report = grader.grade(catalog.get("sdpa"), path, seed=1)
    sparse = [c for c in report.cases if c.verdict.value == "wrong_output"]
    assert sparse and report.verdict.value in ("wrong_output", "not_implemented", "runtime_error"), report.message
    assert all(c.message.startswith("the gradient of `V") and "sparse_coo" in c.message for c in sparse), sparse[0].message


MHA_WRONG_SHAPE_WHEN_ALIASED = """import torch
from torch import nn


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.W_q, self.W_k, self.W_v, self.W_o = (nn.Linear(d_model, d_model) for _ in range(4))

    def forward(self, Q, K, V):
        if Q is K:
            return Q[:, 1:]
        raise RuntimeError("only self-attention here")
"""


def test_an_aliased_argument_is_described_by_the_contracts_names(grader, catalog, tmp_path):
    path = tmp_path / "mha.py"
    path.write_text(MHA_WRONG_SHAPE_WHEN_ALIASED)
    report = grader.grade(catalog.get("mha"), path, seed=1)
    case = next(c for c in report.cases if c.name == "self_attention")
    assert case.verdict.value == "wrong_output", case.message
    other = next(c for c in report.cases if c.name == "different_lengths")
    assert "The call was given Q [2, 65, 32], K [2, 33, 32], V [2, 33, 32]" in other.message, other.message
    shapes = next(c for c in report.cases if c.name == "same_shapes_other_values")
    assert "V = the same tensor object as `K of call 1`" in shapes.message, shapes.message


def test_temporary_inputs_are_freed_and_their_addresses_reused():
    """Call(...).temporary_inputs(): the caller frees a call's tensors once it returns, and the next call's new tensors
    take the freed addresses, as in a decoding loop that builds each step's tensors afresh (so a result kept by
    id() and ._version goes stale). Without it every input stays alive for the whole case."""
    import weakref

    import torch

    from torchcode.grader import execute

    seen: list[tuple[int, int]] = []
    alive: list[weakref.ref] = []

    def entry(x_q, x_kv):
        seen.append((id(x_q), id(x_kv)))
        alive.append(weakref.ref(x_kv))
        return x_q * 1

    def run(temporary):
        seen.clear(), alive.clear()
        steps = [((torch.randn(2, 1, 8), torch.randn(2, 5, 8)), {}) for _ in range(5)]
        prog = execute.Program(init=None, state={}, steps=steps, grad=False, inference=True, temporary=temporary)
        execute.run(entry, False, prog, execute.Stage())
        return [seen[i][1] == seen[i - 1][1] for i in range(1, 5)], [r() is None for r in alive]

    junk = [torch.empty(0) for _ in range(5000)]  # a heap with holes, as in a process that graded much before
    del junk[::3]
    same_kv, freed = run(frozenset(range(5)))
    assert all(freed[:-1]) and all(same_kv), (same_kv, freed)
    same_kv, freed = run(frozenset())
    assert not any(same_kv) and not any(freed)  # kept alive: every call gets a new address


def test_a_new_input_is_placed_at_the_freed_address_even_when_another_block_was_freed_after_it():
    """In a long-lived worker other objects are freed after the inputs (a copy kept to check them unchanged, say), so
    the next tensor made lands elsewhere: CI's worker missed the reuse. _placed finds the freed address."""
    import torch

    from torchcode.grader.execute import _placed

    x, z = torch.randn(3), torch.randn(3)
    address = id(x)
    del x, z  # z's block is now the first one handed out: a plain new tensor takes it
    values = torch.arange(3.0)
    t = _placed(values, address)
    assert id(t) == address and torch.equal(t, torch.arange(3.0)) and not t.requires_grad
    kept = torch.randn(3)  # an address still in use is never found: the tensor comes back as it was
    assert _placed(values, id(kept)) is values


def test_a_memo_by_id_and_version_fails_where_inputs_are_temporary(grader, catalog):
    gqa = catalog.get("gqa")
    report = grader.grade(gqa, gqa.folder / "wrong" / "memo_by_id_and_version.py", seed=2)
    assert {c.name for c in report.cases if not c.passed} == {"inputs_freed_between_calls"}, report.message


def test_temporary_inputs_are_for_forward_only_cases_and_cannot_be_named_later(catalog):
    from torchcode.errors import SpecError
    from torchcode.grader.cases import Alias, Call, Case, CaseDef
    from torchcode.grader.problem import Problem

    mha = Problem(catalog.get("mha"))
    x = lambda rng: rng.randn(1, 3, 8)  # noqa: E731
    for name, build, words in (
            ("with_grad", lambda rng: Case(init=dict(d_model=8, num_heads=2), steps=[
                Call(x(rng), x(rng), x(rng)).temporary_inputs()]), "grad=False"),
            ("named_later", lambda rng: Case(init=dict(d_model=8, num_heads=2), grad=False, steps=[
                Call(x(rng), x(rng), x(rng)).temporary_inputs(), Call(x(rng), Alias(0, 1), x(rng))]),
             "call 2 names an argument of call 1"),
            ("nested", lambda rng: Case(init=dict(d_model=8, num_heads=2), grad=False, steps=[
                Call(x(rng), x(rng), x(rng)).temporary_inputs(), Call(x(rng), (Alias(0, 1),), x(rng))]),
             "call 2 names an argument of call 1")):
        with pytest.raises(SpecError) as e:
            mha.build(CaseDef(name, "", build), seed=3)
        assert f"case '{name}'" in str(e.value) and words in str(e.value), str(e.value)
    same_call = lambda rng: Case(init=dict(d_model=8, num_heads=2), grad=False, steps=[  # noqa: E731
        Call(x(rng), x(rng), Alias(0, 1)).temporary_inputs()])
    mha.build(CaseDef("same_call", "", same_call), seed=3)  # an Alias within the call itself is fine


def test_the_mode_switched_between_calls_reaches_the_layer_and_fresh_instances():
    """Call(...).in_mode(train): model.train() / model.eval() just before that call; later calls and .fresh()
    instances keep the mode, and the case's own train= is the first call's."""
    import torch

    from torchcode.grader import execute

    class Mode(torch.nn.Module):
        def forward(self, x):
            return x + float(self.training)

    x = torch.zeros(1)
    prog = execute.Program(init={}, state={}, steps=[((x,), {})] * 5, grad=False, inference=True, train=True,
                           fresh=frozenset({2, 4}), modes={1: False, 3: True})
    ex = execute.run(Mode, True, prog, execute.Stage())
    assert [float(o) for o in ex.outputs] == [1.0, 0.0, 0.0, 1.0, 1.0]


def test_a_mode_frozen_at_the_first_call_fails_only_the_cases_that_switch_it(grader, catalog):
    mm = catalog.get("minimind_attention")
    report = grader.grade(mm, mm.folder / "wrong" / "mode_frozen_at_first_call.py", seed=2, dtypes=["float32"])
    assert {c.name for c in report.cases if not c.passed} == {"eval_after_training", "eval_after_training_flash"}
    assert "in eval mode after training steps on the same layer" in report.message, report.message


def test_in_mode_is_for_module_problems(catalog):
    from torchcode.errors import SpecError
    from torchcode.grader.cases import Call, Case, CaseDef
    from torchcode.grader.problem import Problem

    x = lambda rng: rng.randn(1, 3, 8)  # noqa: E731
    with pytest.raises(SpecError) as e:
        Problem(catalog.get("sdpa")).build(CaseDef("fn", "", lambda rng: Case(steps=[
            Call(x(rng), x(rng), x(rng)).in_mode(True)])), seed=3)
    assert "case 'fn'" in str(e.value) and ".in_mode()" in str(e.value) and "only module" in str(e.value), str(e.value)


def test_an_output_handed_back_cut_or_reordered():
    """Prev(...).narrow is a view of the output (same storage: speculative decoding's cut), .index_select a copy
    (beam search's reorder); an output with no room for it is the learner's wrong output, said in its terms."""
    import torch

    from torchcode.grader import execute
    from torchcode.grader.cases import Prev

    out = torch.arange(24.0).reshape(2, 3, 4)
    cut = execute.viewed(out, Prev(0, 1).narrow(2, 0, 3).view)
    assert cut.data_ptr() == out.data_ptr() and cut.shape == (2, 3, 3) and torch.equal(cut, out[:, :, :3])
    swapped = execute.viewed(out, Prev(0, 1).index_select(0, [1, 0]).view)
    assert swapped.data_ptr() != out.data_ptr() and torch.equal(swapped, out.flip(0))
    for view in (Prev(0).narrow(2, 0, 5).view, Prev(0).narrow(3, 0, 1).view, Prev(0).index_select(0, [2]).view):
        with pytest.raises(execute.OutputUnusable) as e:
            execute.viewed(out, view, "output[1][0] of call 1")
        assert str(e.value).startswith("output[1][0] of call 1 of shape [2, 3, 4] cannot be handed back"), str(e.value)


def test_a_memo_by_the_returned_cache_address_fails_when_the_caller_cuts_the_cache(grader, catalog):
    kv = catalog.get("kv_cache")
    report = grader.grade(kv, kv.folder / "wrong" / "memo_by_cache_data_ptr.py", seed=5, dtypes=["float32"])
    assert [c.name for c in report.cases if not c.passed] == ["cache_cut_and_reordered"], report.message
    assert ("cache (what call 1 returned[1][0] cut to its first 4 along dim 2 (a view), what call 1 returned[1][1] "
            "cut to its first 4 along dim 2 (a view))") in report.message, report.message
    # a cache in another layout cannot be cut where the contract says: a wrong output, named, not a crash
    report = grader.grade(kv, kv.folder / "wrong" / "cache_heads_last_layout.py", seed=5, dtypes=["float32"],
                          only=["cache_cut_and_reordered"])
    assert report.verdict.value == "wrong_output" and "cannot be handed back as the caller does" in report.message


MHA_LAZY = """
import torch
from torch import nn


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.h = num_heads
        self.W_q, self.W_k, self.W_v, self.W_o = (nn.LazyLinear(d_model) for _ in range(4))

    def forward(self, Q, K, V, mask=None):
        raise NotImplementedError
"""


def test_a_lazy_layer_is_told_to_declare_its_sizes_not_blamed_on_init(grader, catalog, tmp_path):
    """nn.LazyLinear has no shape until its first forward, so the contract's weights cannot be loaded: said so, not a
    RuntimeError "in __init__" from torch's internals (the learner's __init__ ran fine)."""
    path = tmp_path / "mha.py"
    path.write_text(MHA_LAZY)
    report = grader.grade(catalog.get("mha"), path, seed=1)
    assert report.verdict.value == "bad_interface", (report.verdict, report.message)
    assert "W_q.weight, W_q.bias, W_k.weight, W_k.bias ... are not initialised after __init__ (a lazy module such as " \
           "nn.LazyLinear): declare the layers with their sizes" in report.message, report.message
    assert "uninitialized parameter" not in report.message + report.traceback


def test_a_training_step_runs_backward_without_comparing_random_gradients(grader, catalog):
    """Case(compare_grads=False): backward runs, as a training step does; the gradients, random under dropout, are
    compared in expectation only (the reference passes), and a backward that fails is the learner's runtime error."""
    mm = catalog.get("minimind_attention")
    only = ["training_step_with_dropout", "training_step_with_dropout_flash"]
    report = grader.grade(mm, mm.solution_path, seed=3, dtypes=["float32"], only=only)
    assert report.passed and len(report.cases) == 2, report.message
    report = grader.grade(mm, mm.folder / "wrong" / "dropout_in_place_breaks_backward.py", seed=3,
                          dtypes=["float32"], only=only)
    bad = {c.name: c for c in report.cases if not c.passed}
    assert set(bad) == {"training_step_with_dropout"} and bad["training_step_with_dropout"].verdict.value == \
        "runtime_error", [(c.name, c.verdict.value, c.message) for c in report.cases]
    assert "in backward" in bad["training_step_with_dropout"].message, bad["training_step_with_dropout"].message


def test_an_output_of_another_form_handed_to_a_later_call_is_a_wrong_output(grader, catalog):
    """(out, k, v) instead of (out, (k, v)): the call handed output[1] would get the keys alone and fail in the
    learner's code; said as the form it is, before that call, in every case (not a RuntimeError in call 2)."""
    kv = catalog.get("kv_cache")
    report = grader.grade(kv, kv.folder / "wrong" / "flat_triple.py", seed=2, dtypes=["float32"])
    assert report.verdict.value == "wrong_output" and all(c.verdict.value == "wrong_output" for c in report.cases)
    decode = next(c for c in report.cases if c.name == "prefill_then_decode")
    assert decode.message.startswith("call 1 returned (tensor, tensor, tensor) where the problem returns (tensor, "
                                     "(tensor, tensor)), and call 2 is handed output[1] of it"), decode.message


def test_a_later_call_is_handed_the_very_object_returned():
    """Prev(i, *path) hands back what the code returned there (its namedtuple, read by field), while the grader
    reads every output as plain tuples (execute.plain)."""
    import collections

    import torch

    from torchcode.grader import execute
    from torchcode.grader.protocol import PrevRef

    KV = collections.namedtuple("KV", "k v")

    class Keeps(torch.nn.Module):
        def forward(self, x, cache=None):
            k = x if cache is None else torch.cat([cache.k, x])
            return k.sum(), KV(k, k)

    prog = execute.Program(init={}, state={}, steps=[((torch.ones(2),), {}), ((torch.ones(3), PrevRef(0, (1,))), {})],
                           grad=False, inference=True)
    ex = execute.run(Keeps, True, prog, execute.Stage())
    assert [float(o[0]) for o in ex.outputs] == [2.0, 5.0]
    assert type(ex.outputs[0][1]) is tuple and type(ex.returned[0][1]) is KV


MM_FLASH_DETACHED_IN_TRAINING = """
import torch.nn.functional as F
from solution import Attention as _Reference


class Attention(_Reference):
    def forward(self, *args, **kwargs):
        out, past = super().forward(*args, **kwargs)
        return (out.detach() if self.training and self.dropout > 0 else out), past
"""


def test_a_training_step_whose_output_is_detached_has_no_gradient(grader, catalog, tmp_path):
    """compare_grads=False still needs every gradient there: a layer detached in training gets a message."""
    mm = catalog.get("minimind_attention")
    shutil.copy(mm.solution_path, tmp_path / "solution.py")
    path = tmp_path / "attention.py"
    path.write_text(MM_FLASH_DETACHED_IN_TRAINING)
    report = grader.grade(mm, path, seed=3, dtypes=["float32"], only=["training_step_with_dropout"])
    assert report.verdict.value == "wrong_answer", report.message
    assert report.message.startswith("in this training step the gradient of q_proj.weight is missing or malformed"), \
        report.message


def test_a_long_case_has_its_own_time_limit(grader, catalog, tmp_path):
    """Every torch op pays the guards, so a correct loop over 16-wide tiles of causal_attention's 4099 tokens took
    12 s graded, 0.9 s alone, and failed a 5 s limit (right27). The long cases allow 4 times the per-case limit
    (Case.time_factor): a kernel slower than the plain limit passes there; an endless one still stops, and the
    message names the case's own limit."""
    from torchcode.grader.judge import Limits

    spec = catalog.get("causal_attention")
    solution = (ROOT / "solutions" / "causal_attention.py").read_text()
    slow = tmp_path / "slow_on_long.py"
    sleeps = "def causal_attention(Q, K, V):\n    if Q.shape[-2] > 4000:\n        time.sleep(SLEEP)\n"
    slow.write_text("import time\nSLEEP = 1.2\n" + solution.replace("def causal_attention(Q, K, V):\n", sleeps))
    assert "time.sleep(SLEEP)" in slow.read_text()
    grader.limits = Limits(time_limit=0.5, device="cpu")  # 1.2 s is more than a plain case's first run (1 s)
    try:
        report = grader.grade(spec, slow, seed=1, only=["very_long_sequence"])
        assert report.passed, report.message
        slow.write_text(slow.read_text().replace("SLEEP = 1.2", "SLEEP = 60"))
        report = grader.grade(spec, slow, seed=1, only=["very_long_sequence"])
    finally:
        grader.limits = Limits()
    assert report.verdict.value == "time_limit", report.message
    assert ("still running after 4 s (this long case's time limit is 2 s, 4 x the 0.5 s per case; a case's first run "
            "may take twice that)") in report.message, report.message
    assert "small torch operations" in report.message


@pytest.mark.parametrize("seed", [1, 2])
def test_an_output_memoised_by_shape_is_explained_as_state(grader, catalog, seed):
    """Some cases fail on their first run (their own calls share shapes), so the passing cases still run again on new
    values: the replays prove the state, and the report explains that, not a mask (review26: skipping replays
    after any failure explained no_peeking's "positions 5..8 are wrong")."""
    spec = catalog.get("causal_attention")
    report = grader.grade(spec, spec.folder / "wrong" / "output_memo_by_shape.py", seed=seed)
    assert report.verdict.value == "wrong_answer"
    assert report.message.startswith("your code gave a different answer for the same shapes with new values"), \
        report.message

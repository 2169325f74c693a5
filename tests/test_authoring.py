"""The instructor workflow through the real CLI: new, validate, external packs."""

from __future__ import annotations

import shutil

import pytest

from conftest import FIXTURES

PACK = FIXTURES / "course_pack"


def test_new_scaffolds_a_problem_that_validates(cli, workdir):
    r = cli("new", "alibi", "--kind", "function")
    assert r.code == 0, r.text
    assert (workdir / "problems" / "alibi" / "problem.toml").is_file()
    assert (workdir / "solutions" / "alibi.py").is_file() and (workdir / "templates" / "alibi.py.j2").is_file()
    r = cli("new", "alibi_layer", "--kind", "module")
    assert r.code == 0, r.text
    r = cli("validate", "--problems-dir", ".", "--seeds", "2")
    assert r.code == 0, r.out
    assert "All 2 problems are valid" in r.out
    # the new problem is served like a built-in one
    r = cli("start", "alibi_layer", "--problems-dir", ".")
    assert r.code == 0 and "class AlibiLayer(nn.Module)" in (workdir / "alibi_layer.py").read_text()
    r = cli("check", "alibi_layer", "--problems-dir", ".")
    assert r.code == 1 and "Not implemented" in r.out
    assert cli("new", "alibi").code == 2  # never overwrites


def test_packs_from_the_environment(cli, workdir):
    r = cli("list", env={"TORCHCODE_PROBLEMS": str(PACK)})
    assert "good_attention" in r.out and "sdpa" in r.out  # built-ins stay available
    shutil.copy(PACK / "solutions" / "good_layer.py", workdir / "good_layer.py")
    r = cli("check", "good_layer", env={"TORCHCODE_PROBLEMS": str(PACK)})
    assert r.code == 0, r.text


@pytest.mark.parametrize("problem,ok,words", [
    ("good_attention", True, ["reference on seed 1: accepted", "missing_scale.py rejected: wrong_answer"]),
    ("good_layer", True, ["stub graded: not_implemented"]),
    ("stub_passes", False, ["stub graded: accepted", "must raise NotImplementedError"]),
    ("reference_fails", False, ["the reference failed on case 'single_token'", "cannot handle a single token"]),
    ("mutant_survives", False, ["mutant survived: missing_scale.py", "add a hidden case"]),
    ("bad_spec", False, ["field 'difficulty'", "'trivial' is not one of easy, medium, hard"]),
    ("wrong_template_signature", False, ["takes (Q, K), the spec says (Q, K, V)", "make the template's signature"]),
    ("no_variants", False, ["no known-wrong submission", "no correct alternative"]),
])
def test_validate_reports_each_rule(cli, problem, ok, words):
    r = cli("validate", problem, "--problems-dir", str(PACK), "--seeds", "2")
    assert r.code == (0 if ok else 1), r.out
    assert ("PASS" if ok else "FAIL") + f" {problem}" in r.out
    for w in words:
        assert w in r.out, (w, r.out)


def test_validate_whole_pack_fails_if_one_problem_does(cli):
    r = cli("validate", "--problems-dir", str(PACK), "--seeds", "1")
    assert r.code == 1
    assert "good_attention" in r.out and "stub_passes" in r.out and "bad_spec" in r.out
    assert "sdpa" not in r.out  # only the pack's problems


def test_id_clash_is_a_clear_error(cli):
    r = cli("list", "--problems-dir", str(FIXTURES / "clash_pack"))
    assert r.code == 2
    assert "defined twice" in r.err and "clash_pack" in r.err and "Traceback" not in r.err


def test_validate_every_builtin_problem(cli):
    r = cli("validate", "--seeds", "1", timeout=600)
    assert r.code == 0, r.out[-3000:]
    assert "All 12 problems are valid" in r.out

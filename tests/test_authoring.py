"""The instructor workflow through the real CLI: new, validate, external packs."""

from __future__ import annotations

import re
import shutil

import pytest

from conftest import FIXTURES, module_cli

PACK = FIXTURES / "course_pack"


def test_new_scaffolds_a_problem_that_validates(cli, workdir):
    r = cli("new", "alibi", "--kind", "function")
    assert r.code == 0, r.text
    assert (workdir / "problems" / "alibi" / "problem.toml").is_file()
    assert (workdir / "solutions" / "alibi.py").is_file() and (workdir / "templates" / "alibi.py.j2").is_file()
    commented = [ln for ln in (workdir / "problems" / "alibi" / "problem.toml").read_text().splitlines()
                 if " # " in ln and not ln.startswith("#")]
    assert commented and {ln.index(" # ") for ln in commented} == {35}, commented  # one column, id and name filled in
    r = cli("show", "alibi")  # the pack is this folder, not named: said so (it was "Did you mean: ...")
    assert r.code == 2 and "no problem named 'alibi'. It is in the problem pack .: add --problems-dir ." in " ".join(
        r.err.split()), r.text
    r = cli("new", "alibi_layer", "--kind", "module", "--title", 'The "ALiBi" layer \\ biases')  # quotes: valid TOML
    assert r.code == 0, r.text
    r = cli("validate", "--problems-dir", ".", "--seeds", "2")
    assert r.code == 0, r.out
    assert "All 2 problems are valid" in r.out
    assert 'The "ALiBi" layer \\ biases' in cli("list", "--problems-dir", ".").out
    # listed in the order written: each new problem comes after the pack's others (all got 500: sorted by id)
    assert "order = 510" in (workdir / "problems" / "alibi_layer" / "problem.toml").read_text()
    # the new problem is served like a built-in one
    r = cli("start", "alibi_layer", "--problems-dir", ".")
    assert r.code == 0 and "class AlibiLayer(nn.Module)" in (workdir / "alibi_layer.py").read_text()
    # the folder remembers the pack: the next commands run here find the problem without --problems-dir
    said = " ".join(r.out.split())
    assert "then run torchcode check. Stuck? torchcode hint alibi_layer" in said, r.out
    assert (f"alibi_layer comes from the problem pack {workdir.resolve()}: commands run in this folder find it; "
            f"elsewhere add --problems-dir {workdir.resolve()}") in said, r.out
    r = cli("check")
    assert r.code == 1 and "Not implemented" in r.out, r.text
    r = cli("hint")
    assert r.code == 0 and "Hint 1 of 3" in r.out, r.text
    assert "alibi_layer" in cli("status").out
    elsewhere = workdir / "elsewhere"  # another folder does not see it, and says where to look
    elsewhere.mkdir()
    r = cli("check", "alibi_layer", cwd=elsewhere)
    assert r.code == 2 and "no problem named 'alibi_layer'" in r.err, r.text
    r = cli("status", cwd=elsewhere)  # its attempts are not lost, nor silently left out
    assert r.code == 0 and "Not shown: alibi_layer, checked before from a problem pack not loaded here" in " ".join(
        r.out.split()), r.out
    # the pack moved: said so by name, not "no problem named"
    learner = workdir / "learner"
    learner.mkdir()
    moved = workdir.parent / f"{workdir.name}-pack"
    shutil.copytree(workdir / "problems", moved / "problems")
    shutil.copytree(workdir / "solutions", moved / "solutions")
    shutil.copytree(workdir / "templates", moved / "templates")
    assert cli("start", "alibi", "--problems-dir", str(moved), cwd=learner).code == 0
    shutil.rmtree(moved)
    r = cli("check", cwd=learner)
    assert r.code == 2 and "Traceback" not in r.err, r.text
    assert (f"alibi was started in this directory from the problem pack {moved.resolve()}, which is no longer "
            "there: add --problems-dir PACK") in " ".join(r.err.split()), r.err
    for args in (("check", "alibi"), ("hint", "alibi"), ("check", "alibi.py")):  # named, not "no problem named"
        r = cli(*args, cwd=learner)
        assert r.code == 2 and "was started in this directory from the problem pack" in r.err, (args, r.text)
    r = cli("check", "--problems-dir", str(workdir), cwd=learner)  # named where it is now, once
    assert r.code == 1 and "Not implemented" in r.out, r.text
    assert "this folder now remembers" in r.err, r.err
    r = cli("check", cwd=learner)  # and remembered there from then on
    assert r.code == 1 and "Not implemented" in r.out, r.text
    assert cli("new", "alibi").code == 2  # never overwrites


def test_packs_from_the_environment(cli, workdir):
    r = cli("list", env={"TORCHCODE_PROBLEMS": str(PACK)})
    assert "good_attention" in r.out and "sdpa" in r.out  # built-ins stay available
    shutil.copy(PACK / "solutions" / "good_layer.py", workdir / "good_layer.py")
    r = cli("check", "good_layer", env={"TORCHCODE_PROBLEMS": str(PACK)})
    assert r.code == 0, r.text


@pytest.fixture(scope="module")
def pack_validated(tmp_path_factory):
    """`validate` of the whole pack on two seeds, run once: each rule's test below reads its problem's part."""
    return module_cli(tmp_path_factory, "validate", "--problems-dir", str(PACK), "--seeds", "2", timeout=600)


def _part(out: str, problem: str) -> str:
    """What `validate` said about one problem: from its PASS/FAIL line to the next problem's."""
    parts = re.split(r"^(?=(?:PASS|FAIL) \w+$)", out, flags=re.M)
    mine = [p for p in parts if re.match(rf"(PASS|FAIL) {problem}$", p, re.M)]
    assert len(mine) == 1, (problem, out)
    return mine[0]


@pytest.mark.parametrize("problem,ok,words", [
    ("good_attention", True, ["reference on seed 1: accepted", "missing_scale.py rejected: wrong_answer"]),
    ("good_layer", True, ["stub graded: not_implemented"]),
    ("stub_passes", False, ["stub graded: accepted\n", "must raise NotImplementedError"]),
    ("cases_raise", False, ["case 'single_token' raised KeyError: 'single' (line 18)", "cases_raise/cases.py"]),
    ("reference_fails", False, ["the reference failed on case 'single_token'", "cannot handle a single token"]),
    ("mutant_survives", False, ["mutant survived: missing_scale.py", "add a hidden case"]),
    ("bad_spec", False, ["field 'difficulty'", "'trivial' is not one of easy, medium, hard"]),
    ("wrong_template_signature", False, ["takes (Q, K), the spec says (Q, K, V)", "make the template's signature"]),
    ("no_variants", False, ["no known-wrong submission", "no correct alternative"]),
])
def test_validate_reports_each_rule(pack_validated, problem, ok, words):
    part = _part(pack_validated.out, problem)
    assert part.startswith(("PASS" if ok else "FAIL") + f" {problem}\n"), part
    for w in words:
        assert w in part, (w, part)


def test_validate_whole_pack_fails_if_one_problem_does(pack_validated):
    r = pack_validated
    assert r.code == 1, r.text
    assert "good_attention" in r.out and "stub_passes" in r.out and "bad_spec" in r.out
    assert "sdpa" not in r.out  # only the pack's problems
    assert "7 of 9 problems failed validation" in r.out, r.out
    assert "Traceback" not in r.err, r.err  # a case function that raises is a failure of that problem


def test_validate_a_named_problem_that_passes_exits_0(cli):
    r = cli("validate", "good_layer", "--problems-dir", str(PACK), "--seeds", "2")
    assert r.code == 0, r.text
    assert re.findall(r"^(PASS|FAIL) (\w+)$", r.out, re.M) == [("PASS", "good_layer")]  # only the one named


def test_id_clash_is_a_clear_error(cli):
    r = cli("list", "--problems-dir", str(FIXTURES / "clash_pack"))
    assert r.code == 2
    assert "defined twice" in r.err and "clash_pack" in r.err and "Traceback" not in r.err


def test_validate_every_builtin_problem(cli):
    """Spec, statement, stub, reference, GPU dry run, determinism, bench builder and time budget of every built-in
    problem. Their variants are graded by test_variants (the correct ones in every declared dtype, with the same dry
    run), so here they are not graded twice (--no-variants: it halves the suite's longest test)."""
    r = cli("validate", "--seeds", "1", "--no-variants", timeout=600)
    assert r.code == 0, r.out[-3000:]
    assert "All 12 problems pass everything but the variants (not graded: --no-variants)" in r.out, r.out[-2000:]
    assert len(re.findall(r"^PASS \w+$", r.out, re.M)) == 12
    assert "reference on seed 0: accepted" in r.out and "stub graded: not_implemented" in r.out
    assert "not graded (--no-variants)" in r.out and "rejected:" not in r.out


def _variant_of_good_attention(pack, pid: str, change) -> None:
    """A copy of the fixture's good_attention as problem `pid` of `pack`, then one author's mistake made in it."""
    src = PACK / "problems" / "good_attention"
    folder = pack / "problems" / pid
    shutil.copytree(src, folder)
    toml = folder / "problem.toml"
    toml.write_text(toml.read_text().replace('id = "good_attention"', f'id = "{pid}"'))
    for sub, name in (("solutions", f"{pid}.py"), ("templates", f"{pid}.py.j2")):
        (pack / sub).mkdir(exist_ok=True)
        shutil.copy(PACK / sub / name.replace(pid, "good_attention"), pack / sub / name)
    change(folder)


def test_validate_names_an_authors_slips_in_their_terms(cli, tmp_path):
    """Mistakes a new author makes, each said with the file, what is wrong and the fix, never a traceback: a
    misspelt problem.toml field (it silently kept the default time limit), a Call keyword the entry point does
    not take (it was a TypeError blamed on the reference), a known-wrong file with no '# expect:' line (any
    rejection passed, a typo included) and a missing statement.md (said twice, the second time as the template's)."""
    pack = tmp_path / "pack"

    def edit(path, old, new):
        text = path.read_text()
        assert old in text, (path, old)
        path.write_text(text.replace(old, new))

    _variant_of_good_attention(pack, "field_typo", lambda f: edit(f / "problem.toml", "time_limit =", "time_limt ="))
    _variant_of_good_attention(pack, "keyword_typo", lambda f: edit(
        f / "cases.py", "Call(rng.randn(1, 1, 8), rng.randn(1, 1, 8), rng.randn(1, 1, 8))",
        "Call(rng.randn(1, 1, 8), rng.randn(1, 1, 8), v=rng.randn(1, 1, 8))"))

    def two_slips(folder):
        edit(folder / "wrong" / "missing_scale.py", "# expect: wrong_answer\n", "")
        (folder / "statement.md").unlink()

    _variant_of_good_attention(pack, "two_slips", two_slips)

    def overflows_float16(folder):  # scores near 1e5: float16 (max 65504) overflows, float32 and bfloat16 do not
        edit(folder / "problem.toml", "floor = 1e-5", 'floor = 1e-5\ndtypes = ["float32", "bfloat16", "float16"]')
        (folder / "cases.py").write_text((folder / "cases.py").read_text() + (
            "\n\n@case(targets='huge scores')\ndef huge(rng):\n"
            "    return Case(steps=[Call(rng.randn(1, 8, 64, scale=100.0), rng.randn(1, 8, 64, scale=100.0), "
            "rng.randn(1, 8, 64))], grad=False)\n"))

    _variant_of_good_attention(pack, "overflows_float16", overflows_float16)
    _variant_of_good_attention(pack, "no_steps", lambda f: edit(  # every submission, the stub too, passed it
        f / "cases.py", "Case(steps=[Call(rng.randn(1, 1, 8), rng.randn(1, 1, 8), rng.randn(1, 1, 8))])", "Case(steps=[])"))
    (pack / "templates" / "no_steps.py.j2").write_text((pack / "templates" / "no_steps.py.j2").read_text() + "{% if %}\n")
    _variant_of_good_attention(pack, "misnamed_reference", lambda f: None)
    edit(pack / "solutions" / "misnamed_reference.py", "def good_attention(", "def attention(")
    r = cli("validate", "--problems-dir", str(pack), "--seeds", "1")
    assert r.code == 1 and "Traceback" not in r.text, r.text
    out = " ".join(r.out.split())
    assert "6 of 6 problems failed validation" in out, r.out
    no_steps = " ".join(_part(r.out, "no_steps").split())
    assert "case 'single_token' has no steps file: ../pack/problems/no_steps/cases.py fix: give it at least one " \
        "Call(...)" in no_steps, no_steps
    assert "the template does not render: Expected an expression, got 'end of statement block' (line " in no_steps
    assert ("the reference does not define `good_attention` (the [entry] name in problem.toml) file: "
            "../pack/solutions/misnamed_reference.py fix: name its function `good_attention`, or change [entry] "
            "name") in " ".join(_part(r.out, "misnamed_reference").split())
    # the reference fails its own case in float16, as a GPU grades it (validate passed it: it graded float32 alone)
    low = " ".join(_part(r.out, "overflows_float16").split())
    assert "reference on seed 0 (float32, bfloat16, float16): wrong_answer in case huge [float16]" in low, low
    assert "the case is ill-conditioned in that dtype" in low and "--seed 0 --dtype float16 --problems-dir" in low, low
    field = _part(r.out, "field_typo")
    assert "field 'grading.time_limt': is not a field torchcode knows" in field and "did you mean `time_limit`?" in field
    keyword = " ".join(_part(r.out, "keyword_typo").split())
    assert ("case 'single_token' (step 0) passes `v=`, which good_attention does not take: its parameters are "
            "(Q, K, V)") in keyword and "fix: did you mean `V=`?" in keyword and "solutions/" not in keyword, keyword
    expect = " ".join(_part(r.out, "two_slips").split())
    assert "missing_scale.py has no '# expect: VERDICT' line" in expect and "e.g. '# expect: wrong_answer'" in expect
    statement = " ".join(_part(r.out, "two_slips").split())
    assert statement.count("statement.md") == 2 and "fix the template" not in statement, statement  # what, and file:
    assert "cannot read the statement" in statement and "fix: add statement.md to the problem folder" in statement


def test_a_folder_remembers_a_pack_by_the_path_given_and_leaves_out_one_that_clashes(cli, workdir, tmp_path):
    """A course re-points a `current` symlink: the folder keeps following the name. A second copy of the pack
    started beside it clashes (the same ids): the latest started is used, the other left out alone."""
    (tmp_path / "v1").mkdir()
    shutil.copytree(PACK, tmp_path / "v1" / "pack")
    (tmp_path / "current").symlink_to(tmp_path / "v1" / "pack")
    r = cli("start", "good_attention", "--problems-dir", str(tmp_path / "current"))
    assert r.code == 0 and f"elsewhere add --problems-dir {tmp_path / 'current'}" in " ".join(r.out.split()), r.out
    shutil.copytree(PACK, tmp_path / "v2")
    (tmp_path / "current").unlink()
    (tmp_path / "current").symlink_to(tmp_path / "v2")
    shutil.rmtree(tmp_path / "v1")
    r = cli("check")
    assert r.code == 1 and "Not implemented" in r.out, r.text  # found through the re-pointed name
    shutil.copytree(PACK, tmp_path / "copy")
    r = cli("start", "good_layer", "--problems-dir", str(tmp_path / "copy"))
    assert r.code == 0 and "commands run in this folder find it" in r.out, r.text
    for args in (("check",), ("hint",), ("hint", "good_attention")):
        r = cli(*args)
        assert r.code in (0, 1) and "Traceback" not in r.err and "no problem named" not in r.err, (args, r.text)


def test_a_file_named_from_outside_its_folder_says_which_pack_that_folder_remembers(cli, workdir, tmp_path):
    """`check student/good_attention.py` from the parent: the problem's pack is remembered by student/, not here.
    The message names that pack and the two ways on, not only --problem (which would then say 'no problem')."""
    shutil.copytree(PACK, tmp_path / "pack")
    student = workdir / "student"
    student.mkdir()
    assert cli("start", "good_attention", "--problems-dir", str(tmp_path / "pack"), cwd=student).code == 0
    r = cli("check", "student/good_attention.py")
    said = " ".join(r.err.split())
    assert r.code == 2 and "Traceback" not in r.text, r.text
    assert (f"good_attention was started in student from the problem pack {tmp_path / 'pack'}. Run `torchcode check` "
            f"in that folder, or add --problems-dir {tmp_path / 'pack'}") in said, said
    r = cli("check", "student/good_attention.py", "--problems-dir", str(tmp_path / "pack"))
    assert r.code == 1 and "Not implemented" in r.out, r.text  # and the way it names works
    (workdir / "other.py").write_text("x = 1\n")
    r = cli("check", "other.py")
    assert r.code == 2 and "cannot tell which problem other.py solves: add --problem PROBLEM" in r.err, r.text


def test_expect_lines_take_the_label_check_prints_too():
    """check prints 'Wrong interface' for bad_interface: an author who wrote `# expect: wrong_interface` was told it
    is not a verdict."""
    from torchcode.authoring.validate import _as_verdict

    assert _as_verdict("wrong_interface") == "bad_interface" and _as_verdict("Wrong_answer") == "wrong_answer"
    assert _as_verdict("time_limit_exceeded") == "time_limit" and _as_verdict("wrong_anwser") == "wrong_anwser"

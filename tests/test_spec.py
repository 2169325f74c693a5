"""Malformed problem specs fail with one message naming the file, the field and the fix."""

from __future__ import annotations

import shutil

import pytest

from conftest import ROOT
from torchcode.catalog import load_catalog
from torchcode.catalog.spec import load_spec
from torchcode.errors import SpecError, UsageError


def make_pack(tmp_path, toml: str, pid: str = "toy"):
    folder = tmp_path / "pack" / "problems" / pid
    folder.mkdir(parents=True)
    (folder / "problem.toml").write_text(toml)
    return folder


GOOD = """format = 1
id = "toy"
title = "Toy"
difficulty = "easy"
hints = ["one"]

[entry]
kind = "function"
name = "toy"
params = ["x"]
"""


def test_good_spec_loads(tmp_path):
    folder = make_pack(tmp_path, GOOD)
    spec = load_spec(folder, folder.parents[1])
    assert spec.entry.params == ("x",)
    assert "torch.nn.functional.scaled_dot_product_attention" in spec.forbidden


@pytest.mark.parametrize("change,field,words", [
    (lambda t: t.replace('difficulty = "easy"', 'difficulty = "trivial"'), "difficulty", "trivial"),
    (lambda t: t.replace("format = 1", "format = 9"), "format", "not supported"),
    (lambda t: t.replace('id = "toy"', 'id = "other"'), "id", "folder name"),
    (lambda t: t.replace('hints = ["one"]\n', ""), "hints", "missing"),
    (lambda t: t.replace('kind = "function"', 'kind = "lambda"'), "entry.kind", "neither"),
    (lambda t: t.replace('params = ["x"]', 'params = ["x y"]'), "entry.params[0]", "identifier"),
    (lambda t: t.replace('title = "Toy"', "title = 3"), "title", "must be str"),
    (lambda t: t + '\n[rules]\nallowed = ["torch.exp"]\n', "rules.allowed", "not forbidden by default"),
    # a misspelt key would silently keep the default (a time limit, a tolerance): named, with the likely field
    (lambda t: t + "\n[grading]\ntime_limt = 30\n", "grading.time_limt", "did you mean `time_limit`?"),
    (lambda t: t.replace('title = "Toy"', 'title = "Toy"\nsumary = "s"'), "sumary", "did you mean `summary`?"),
    (lambda t: t.replace('params = ["x"]', 'params = ["x"]\ndtypes = ["float32"]'), "entry.dtypes",
     "belongs under [grading]"),
])
def test_bad_field_is_named(tmp_path, change, field, words):
    folder = make_pack(tmp_path, change(GOOD))
    with pytest.raises(SpecError) as e:
        load_spec(folder, folder.parents[1])
    assert e.value.field == field
    assert str(folder / "problem.toml") in str(e.value) and words in str(e.value)


def test_misplaced_top_level_key_is_explained(tmp_path):
    text = GOOD.replace('hints = ["one"]\n', "") + 'hints = ["one"]\n'
    folder = make_pack(tmp_path, text)
    with pytest.raises(SpecError, match=r"move `hints` above the first \[table\]"):
        load_spec(folder, folder.parents[1])


def test_invalid_toml(tmp_path):
    folder = make_pack(tmp_path, "format = \n")
    with pytest.raises(SpecError, match="not valid TOML"):
        load_spec(folder, folder.parents[1])


def test_broken_problem_does_not_hide_the_others(tmp_path, cli):
    folder = make_pack(tmp_path, GOOD.replace('difficulty = "easy"', 'difficulty = "?"'))
    r = cli("list", "--problems-dir", str(folder.parents[1]))
    assert r.code == 0 and "sdpa" in r.out
    assert "problem 'toy' is skipped" in r.err and "difficulty" in r.err
    r = cli("show", "toy", "--problems-dir", str(folder.parents[1]))
    assert r.code == 2 and "field 'difficulty'" in r.err and "Traceback" not in r.err


def test_id_clash_names_both_places(tmp_path):
    pack = tmp_path / "pack"
    shutil.copytree(ROOT / "problems" / "sdpa", pack / "problems" / "sdpa")
    with pytest.raises(UsageError, match="defined twice"):
        load_catalog([pack])


def test_parsed_specs_are_cached_and_revalidated(tmp_path, torchcode_home):
    import os

    from torchcode.cache import DerivedCache

    folder = make_pack(tmp_path, GOOD)
    pack = folder.parents[1]
    assert load_catalog([pack]).get("toy").title == "Toy"
    cache_file = torchcode_home / "cache" / "problem-specs.json"
    assert str(folder / "problem.toml") in DerivedCache("problem-specs").entries
    # an edit (new mtime) is seen, and what it breaks is reported
    toml = folder / "problem.toml"
    toml.write_text(GOOD.replace('difficulty = "easy"', 'difficulty = "trivial"'))
    os.utime(toml, ns=(toml.stat().st_atime_ns, toml.stat().st_mtime_ns + 10**9))
    cat = load_catalog([pack])
    assert "toy" in cat.broken and cat.broken["toy"].field == "difficulty"
    # a corrupt cache is ignored and rewritten
    cache_file.write_text("{not json")
    toml.write_text(GOOD)
    assert load_catalog([pack]).get("toy").difficulty == "easy"
    assert DerivedCache("problem-specs").entries


def test_rendered_stubs_follow_their_template(cli, workdir, tmp_path):
    """start renders from a cache; editing the template is picked up on the next start."""
    import os

    pack = tmp_path / "pack"
    assert cli("new", "toy_attn", "--dir", str(pack)).code == 0
    assert cli("start", "toy_attn", "--problems-dir", str(pack)).code == 0
    template = pack / "templates" / "toy_attn.py.j2"
    template.write_text(template.read_text().replace("# TODO 1: the first step", "# TODO 1: edited step"))
    os.utime(template, ns=(template.stat().st_atime_ns, template.stat().st_mtime_ns + 10**9))
    assert cli("start", "toy_attn", "--force", "--problems-dir", str(pack)).code == 0
    assert "# TODO 1: edited step" in (workdir / "toy_attn.py").read_text()


@pytest.mark.parametrize("dtypes,words", [('("bfloat16")', "names 'b', not a dtype"), ('("float32", "bf16")', "'bf16'"),
                                          ("()", "names none of the problem's dtypes")])
def test_a_case_that_would_never_run_in_any_dtype_is_an_authoring_error(tmp_path, dtypes, words):
    """@case(dtypes=("bfloat16")) is a string, not a tuple: the case ran in no dtype, silently."""
    from torchcode.grader.problem import Problem

    pack = tmp_path / "pack"
    shutil.copytree(ROOT / "problems" / "sdpa", pack / "problems" / "sdpa")
    cases = pack / "problems" / "sdpa" / "cases.py"
    text = cases.read_text()
    assert 'dtypes=("float32", "bfloat16"))' in text
    cases.write_text(text.replace('dtypes=("float32", "bfloat16"))', f"dtypes={dtypes})"))
    with pytest.raises(SpecError) as e:
        Problem(load_spec(pack / "problems" / "sdpa", pack))
    assert "case 'allowed_scores_below_float16_range'" in str(e.value) and words in str(e.value), str(e.value)

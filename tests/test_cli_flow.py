"""End to end through the real CLI, as a learner uses it, in temp dirs with a temp TORCHCODE_HOME."""

from __future__ import annotations

import json
import shutil
import sqlite3

from conftest import ROOT


def test_start_check_stub_then_reference(cli, workdir, torchcode_home):
    r = cli("start", "gqa")
    assert r.code == 0, r.text
    stub = (workdir / "gqa.py").read_text()
    assert "class GroupQueryAttention(nn.Module)" in stub
    assert "def __init__(self, d_model, num_heads, num_kv_heads)" in stub
    assert "TODO" in stub and "Grouped-Query Attention" in stub  # statement as docstring

    r = cli("check")
    assert r.code == 1, r.text
    assert "Not implemented yet" in r.out and "Replace the TODOs" in r.out
    assert "Traceback" not in r.text

    shutil.copy(ROOT / "solutions" / "gqa.py", workdir / "gqa.py")
    r = cli("check")
    assert r.code == 0, r.text
    assert "Accepted" in r.out

    rows = sqlite3.connect(torchcode_home / "progress.sqlite3").execute(
        "SELECT problem, verdict FROM attempts ORDER BY id").fetchall()
    assert rows == [("gqa", "not_implemented"), ("gqa", "accepted")]

    r = cli("status")
    assert r.code == 0 and "1 solved" in r.out
    r = cli("list")
    assert "solved" in r.out


def test_check_by_id_and_by_path(cli, workdir):
    shutil.copy(ROOT / "solutions" / "sdpa.py", workdir / "sdpa.py")
    assert cli("check", "sdpa").code == 0
    (workdir / "mine.py").write_text((ROOT / "solutions" / "sdpa.py").read_text())
    assert cli("check", "mine.py", "--problem", "sdpa").code == 0
    r = cli("check", "mine.py")
    assert r.code == 2 and "--problem" in r.err


def test_wrong_answer_report_names_case_error_and_seed(cli, workdir):
    src = (ROOT / "problems" / "sdpa" / "wrong" / "scale_by_dk.py").read_text()
    (workdir / "sdpa.py").write_text(src)
    r = cli("check", "sdpa")
    assert r.code == 1
    assert "Wrong answer" in r.out and "batched_3d" in r.out
    assert "max abs err" in r.out  # the case table's numbers
    # the explained case is a plain mismatch (expected vs got) or, on some seeds, sdpa's scale property
    assert "expected" in r.out or "sqrt" in r.out, r.out
    seed = r.out.split("seed ")[1].split(":")[0]
    again = cli("check", "sdpa", "--seed", seed, "--json")
    first = json.loads(again.out)
    assert first["seed"] == int(seed)
    again2 = json.loads(cli("check", "sdpa", "--seed", seed, "--json").out)
    assert again2["cases"][0]["mismatch"] == first["cases"][0]["mismatch"]  # same seed, same inputs


def test_json_report_schema(cli, workdir):
    shutil.copy(ROOT / "problems" / "mha" / "wrong" / "scale_by_d_model.py", workdir / "mha.py")
    r = cli("check", "mha", "--json")
    assert r.code == 1
    report = json.loads(r.out)  # stdout is exactly one JSON document
    assert report["problem"] == "mha" and report["verdict"] == "wrong_answer" and report["passed"] is False
    assert isinstance(report["seed"], int) and report["cases_total"] == len(report["cases"]) > 0
    case = report["cases"][0]
    assert set(case) >= {"name", "verdict", "targets", "message", "mismatch", "seconds"}
    mm = case["mismatch"]
    assert set(mm) >= {"what", "max_abs_err", "max_rel_err", "index", "expected", "got", "allowed"}
    assert {"seconds", "sha256", "limits", "output"} <= set(report)


def test_start_never_overwrites(cli, workdir):
    assert cli("start", "sdpa").code == 0
    (workdir / "sdpa.py").write_text("# my work\n")
    r = cli("start", "sdpa")
    assert r.code == 2 and "already exists" in r.err
    assert (workdir / "sdpa.py").read_text() == "# my work\n"
    r = cli("start", "sdpa", "--force")
    assert r.code == 0
    backups = list(workdir.glob("sdpa.py.bak-*"))
    assert len(backups) == 1 and backups[0].read_text() == "# my work\n"


def test_reset_keeps_backup(cli, workdir):
    cli("start", "mha")
    (workdir / "mha.py").write_text("# attempt 1\n")
    r = cli("reset", "mha")
    assert r.code == 0, r.text
    assert "TODO" in (workdir / "mha.py").read_text()
    assert [b.read_text() for b in workdir.glob("mha.py.bak-*")] == ["# attempt 1\n"]


def test_hints_are_revealed_in_order(cli):
    r1 = cli("hint", "gqa")
    assert "Hint 1 of 3" in r1.out
    r2 = cli("hint", "gqa")
    assert "Hint 2 of 3" in r2.out and "Hint 1" not in r2.out
    r = cli("hint", "gqa", "--all")
    assert "Hint 1 of 3" in r.out and "Hint 2 of 3" in r.out and "Hint 3" not in r.out
    cli("hint", "gqa")
    r = cli("hint", "gqa")
    assert "Hint 3 of 3" in r.out and "last hint" in r.out


def test_solution_needs_confirmation_until_solved(cli, workdir):
    r = cli("solution", "sdpa")
    assert r.code == 2 and "--yes" in r.err
    r = cli("solution", "sdpa", "--yes")
    assert r.code == 0 and "def scaled_dot_product_attention" in r.out
    shutil.copy(ROOT / "solutions" / "sdpa.py", workdir / "sdpa.py")
    assert cli("check", "sdpa").code == 0
    assert "def scaled_dot_product_attention" in cli("solution", "sdpa").out


def test_show_renders_statement(cli):
    r = cli("show", "sdpa")
    assert r.code == 0
    assert "Scaled Dot-Product Attention" in r.out and "scaled_dot_product_attention(Q, K, V, mask=None)" in r.out
    assert "Forbidden" in r.out
    assert "torchcode bench sdpa times" in " ".join(r.out.split())  # sdpa has a benchmark; rope has none
    r = cli("show", "rope")
    assert r.code == 0 and "torchcode bench" not in r.out
    # the entry point as the stub declares it: which arguments a caller may leave out
    assert "entry point: apply_rope(q, k, base=10000.0)" in " ".join(r.out.replace("│", "").split()), r.out
    r = cli("show", "minimind_attention")
    assert ("forward(self, x, position_embeddings, past_key_value=None, use_cache=False, attention_mask=None)"
            in " ".join(r.out.replace("│", "").split())), r.out


def test_usage_errors_exit_2_with_one_message(cli, workdir):
    r = cli("check")
    assert r.code == 2 and "nothing has been started" in r.err and "Traceback" not in r.err
    r = cli("show", "gqaa")
    assert r.code == 2 and "Did you mean: gqa" in r.err
    r = cli("check", "missing.py", "--problem", "sdpa")
    assert r.code == 2 and "no such file" in r.err
    r = cli("check", "sdpa")
    assert r.code == 2 and "torchcode start sdpa" in r.err


def test_list_filters(cli):
    r = cli("list", "--difficulty", "hard")
    assert "gqa" in r.out and "sdpa" not in r.out
    r = cli("list", "--tag", "masking")
    assert "sdpa" in r.out and "gqa" not in r.out
    assert cli("list", "--difficulty", "impossible").code == 2


def test_one_input_form_left_unfinished_is_reported_case_by_case(cli, workdir, torchcode_home):
    """A learner who raises NotImplementedError for one input form (5-D inputs) and gets the rest right is told
    which case: the case table, the case's name and the reproduce line, not only the stub's "replace the TODOs". A
    NotImplementedError torch raises from a call ("lu_cpu" not implemented for 'Half') is a runtime error of that
    line, not an unfinished stub."""
    src = (ROOT / "solutions" / "sdpa.py").read_text()
    head, sep, body = src.partition("def scaled_dot_product_attention(")
    args, colon, rest = body.partition(":\n")
    (workdir / "sdpa.py").write_text(head + sep + args + colon + "    if Q.dim() > 4:\n"
                                     "        raise NotImplementedError('more than two batch dims')\n" + rest)
    r = cli("check", "sdpa", "--json")
    report = json.loads(r.out)
    assert r.code == 1 and report["verdict"] == "not_implemented", r.text
    unfinished = {c["name"] for c in report["cases"] if c["verdict"] == "not_implemented"}
    assert unfinished and any(c["verdict"] == "accepted" for c in report["cases"])
    assert "more than two batch dims" in report["message"] and "handle this case's inputs too" in report["message"]
    assert "Replace the TODOs" not in report["message"]
    r = cli("check", "sdpa")
    assert "Not implemented yet" in r.out and any(name in r.out for name in unfinished), r.out
    assert "--seed" in r.out and "raise NotImplementedError" in r.out, r.out  # reproduce line; the line that raised

    (workdir / "sdpa.py").write_text(head + sep + args + colon + "    torch.linalg.lu_factor(Q.half())\n" + rest)
    r = cli("check", "sdpa", "--json")
    report = json.loads(r.out)
    assert report["verdict"] == "runtime_error" and "lu_cpu" in report["message"], report["message"]
    rows = sqlite3.connect(torchcode_home / "progress.sqlite3").execute(
        "SELECT verdict FROM attempts ORDER BY id").fetchall()
    assert rows == [("not_implemented",), ("not_implemented",), ("runtime_error",)]

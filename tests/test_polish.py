"""What a new user trips over, through the real CLI: version, help, usage lines, problem numbers and
spellings, filters, prompts, defaults, JSON errors, pack-aware reproduce lines."""

from __future__ import annotations

import json
import os
import pty
import re
import shutil
import subprocess

import pytest

from conftest import FIXTURES, ROOT, at_once, on_a_terminal

PACK = FIXTURES / "course_pack"


def test_version_and_short_help(cli):
    from importlib.metadata import version

    r = cli("--version")
    assert r.code == 0 and r.out.strip() == f"torchcode {version('torchcode')}"
    r = cli("-h")
    assert r.code == 0 and "Commands:" in r.out and "history" in r.out
    r = cli("check", "-h")
    assert r.code == 0 and "--seed" in r.out


def test_usage_lines_name_arguments_in_capitals(cli):
    for args, usage in [(("show",), "Usage: torchcode show [OPTIONS] PROBLEM"),
                        (("start",), "Usage: torchcode start [OPTIONS] PROBLEM"),
                        (("solution",), "Usage: torchcode solution [OPTIONS] PROBLEM")]:
        r = cli(*args)
        assert r.code == 2 and usage in r.err and "{" not in r.err, r.err
    for cmd, usage in [("check", "[TARGET]"), ("hint", "[PROBLEM]"), ("history", "[PROBLEM]"),
                       ("validate", "[PROBLEM]...")]:
        r = cli(cmd, "-h")
        assert f"Usage: torchcode {cmd} [OPTIONS] {usage}" in r.out, r.out
    listing = cli("-h").out
    commands = re.findall(r"^  (\w+)  ", listing.split("Commands:")[1], re.M)
    assert {"list", "check", "history"} <= set(commands)
    for cmd in commands:  # every command, those added later included
        usage = cli(cmd, "-h").out.splitlines()[0]
        assert re.fullmatch(rf"Usage: torchcode {cmd} \[OPTIONS\]( [A-Z_\[\]]+(\.\.\.)?)*", usage), usage


def test_shell_completion_is_offered(cli):
    r = cli("--show-completion", env={"SHELL": "/bin/bash"})
    assert r.code == 0 and "complete" in r.out and "torchcode" in r.out, r.text
    # typer's completion protocol answers a completion request with the commands
    r = cli(env={"_TORCHCODE_COMPLETE": "complete_bash", "COMP_WORDS": "torchcode hi", "COMP_CWORD": "1"})
    assert r.code == 0 and "hint" in r.out and "history" in r.out, r.text


@pytest.mark.parametrize("typed", ["10", "GQA", "Gqa", " 10"])
def test_problems_by_number_and_any_spelling(cli, workdir, typed):
    r = cli("show", typed)
    assert r.code == 0 and "Grouped-Query Attention" in r.out, r.text
    r = cli("start", typed)
    assert r.code == 0 and (workdir / "gqa.py").is_file(), r.text


def test_dash_is_underscore_and_bad_numbers_are_named(cli, workdir):
    r = cli("start", "kv-cache")
    assert r.code == 0 and (workdir / "kv_cache.py").is_file(), r.text
    r = cli("show", "Repeat-KV")
    assert r.code == 0 and "Repeat KV" in r.out
    r = cli("show", "13")
    assert r.code == 2 and "no problem number 13" in r.err and "1 to 12" in r.err


def test_list_filters_keep_the_global_numbers(cli):
    full = cli("list").out
    numbers = dict(re.findall(r"^\s*(\d+)\s+(\w+)\s", full, re.M))
    assert numbers["10"] == "gqa"
    hard = cli("list", "--difficulty", "hard").out
    shown = dict(re.findall(r"^\s*(\d+)\s+(\w+)\s", hard, re.M))
    assert shown and all(numbers[n] == pid for n, pid in shown.items()), hard
    assert "1" not in shown  # repeat_kv (easy) is not renumbered into its place
    r = cli("show", [n for n, pid in shown.items() if pid == "kv_cache"][0])
    assert "KV Cache" in r.out


def test_list_unknown_tag_names_the_tags(cli):
    r = cli("list", "--tag", "nosuch")
    assert r.code == 2 and "nosuch" in r.err
    for tag in ("gqa", "rope", "kv-cache", "warm-up"):
        assert tag in r.err, r.err
    r = cli("list", "--tag", "ROPE")
    assert r.code == 0 and "rope" in r.out


def test_show_prints_the_forbidden_list_once(cli):
    for pid in ("sdpa", "rope", "gqa"):
        out = cli("show", pid).out
        assert out.count("torch.nn.functional.scaled_dot_product_attention") == 1, out
        assert len(re.findall(r"Forbidden", out)) == 1, out


def test_answering_no_to_solution_says_so(workdir, torchcode_home):
    out = on_a_terminal(["solution", "sdpa"], b"n\n", workdir)
    assert "Not shown" in out and "def scaled_dot_product_attention" not in out, out


def test_status_says_what_best_time_measures(cli):
    r = cli("status")
    assert r.code == 0 and "best time:" in r.out and "fastest accepted check" in r.out


def test_hint_and_reset_default_to_the_last_problem_started(cli, workdir):
    r = cli("hint")
    assert r.code == 2 and "torchcode hint PROBLEM" in r.err
    assert cli("start", "mha").code == 0
    r = cli("hint")
    assert r.code == 0 and "Hint 1 of" in r.out
    assert "Hint 1 of" in cli("hint", "mha", "--all").out  # it was recorded for mha
    (workdir / "mha.py").write_text("# half done\n")
    r = cli("reset")
    assert r.code == 0 and "Restored the stub" in r.out
    assert "class MultiHeadAttention" in (workdir / "mha.py").read_text()
    assert [p.read_text() for p in workdir.glob("mha.py.bak*")] == ["# half done\n"]


@pytest.mark.parametrize("args,words", [
    (["nosuch"], "no problem named 'nosuch'"),
    (["--seed", "-3", "sdpa"], "--seed must be"),
    (["--seed", "x"], "'x' is not a valid int"),
    (["--bogus"], "No such option: --bogus"),
    ([], "nothing has been started"),
])
def test_check_json_usage_errors_are_json(cli, args, words):
    r = cli("check", "--json", *args)
    assert r.code == 2, r.text
    err = json.loads(r.out)  # stdout is one JSON object, even for an error
    assert err["exit_code"] == 2 and words in err["error"], err
    assert "Traceback" not in r.err


def test_bench_on_a_stub_says_not_implemented(cli, workdir):
    assert cli("start", "sdpa").code == 0
    r = cli("bench", "sdpa", "--device", "cpu")
    assert r.code == 1 and "not implemented" in r.err and "not_implemented" not in r.err, r.text


def test_reproduce_line_names_the_pack(cli, workdir):
    shutil.copy(PACK / "problems" / "good_attention" / "wrong" / "missing_scale.py", workdir / "good_attention.py")
    r = cli("check", "good_attention", "--problems-dir", str(PACK))
    assert r.code == 1, r.text
    line = next(line for line in r.out.splitlines() if "reproduce with" in line)
    command = line.split("`")[1]
    assert "--problems-dir" in command
    shutil.copy(ROOT / "problems" / "sdpa" / "wrong" / "scale_by_dk.py", workdir / "sdpa.py")
    again, twice, builtin = at_once(
        lambda: cli(*command.split()[1:], "--json"),  # the command as printed works as it is
        lambda: cli(*command.split()[1:], env={"TORCHCODE_PROBLEMS": str(PACK)}),  # the pack named twice
        lambda: cli("check", "sdpa"))  # a built-in problem
    assert again.code == 1 and json.loads(again.out)["seed"] == int(line.split()[1].rstrip(":"))
    # also when the pack comes from TORCHCODE_PROBLEMS (the same pack named twice is one pack)
    assert twice.code == 1 and "defined twice" not in twice.err, twice.text
    # a built-in problem's line has no --problems-dir
    assert "reproduce with" in builtin.out and "--problems-dir" not in builtin.out


ENDLESS = "def scaled_dot_product_attention(Q, K, V, mask=None):\n    while True:\n        pass\n"


def _pty_run(args: list[str], cwd, json_out: bool = False) -> tuple[int, list[tuple[float, bytes]]]:
    """Run the CLI with stdout and stderr on a terminal; what it drew, with when (seconds from start)."""
    import time

    leader, follower = pty.openpty()
    t0 = time.monotonic()
    p = subprocess.Popen([shutil.which("torchcode"), *args], cwd=cwd, stdin=subprocess.DEVNULL, stdout=follower,
                         stderr=follower, env={**os.environ, "NO_COLOR": "1", "COLUMNS": "120"})
    os.close(follower)
    seen = []
    try:
        while chunk := os.read(leader, 4096):
            seen.append((time.monotonic() - t0, chunk))
    except OSError:  # the other side closed
        pass
    os.close(leader)
    return p.wait(timeout=120), seen


def test_a_long_check_shows_what_runs_on_a_terminal(workdir, torchcode_home):
    (workdir / "sdpa.py").write_text(ENDLESS)
    code, seen = _pty_run(["check", "sdpa", "--time-limit", "1"], workdir)
    assert code == 1
    text = b"".join(chunk for _, chunk in seen).decode()
    verdict_at = next(t for t, chunk in seen if b"Time limit exceeded" in chunk)
    running = [t for t, chunk in seen if re.search(rb"checking sdpa\.py: case \d+/\d+: \w+", chunk)]
    assert running and running[0] < verdict_at, text  # the case and a clock, before the verdict
    assert re.search(r"case \d+/\d+: \w+, float32  1\.\ds", text), text  # the clock ticks
    before = re.sub(r"\x1b\[[0-9;]*m", "", text[:text.index("Time limit exceeded")])  # styles aside
    assert before.endswith("\r\x1b[2K"), repr(before[-80:])  # erased before the report
    assert text.count("checking sdpa.py") > 5
    starting = [float(t) for t in re.findall(r"starting the grader \(importing torch\)  (\d+\.\d)s", text)]
    assert all(t >= 0.5 for t in starting), starting  # nothing drawn in the first half second


def test_no_progress_line_in_pipes_or_json(cli, workdir):
    (workdir / "sdpa.py").write_text(ENDLESS)
    r, (code, seen) = at_once(lambda: cli("check", "sdpa", "--time-limit", "1"),
                              lambda: _pty_run(["check", "sdpa", "--time-limit", "1", "--json"], workdir))
    assert r.code == 1 and "checking" not in r.text and "\x1b" not in r.text
    text = b"".join(chunk for _, chunk in seen).decode()
    assert code == 1 and "checking" not in text and "\x1b[2K" not in text
    assert json.loads(text)["verdict"] == "time_limit"


TILED = ROOT / "problems" / "gqa" / "wrong" / "tiled_kv_heads.py"


@pytest.fixture(scope="module")
def tiled_report(grader, catalog):
    """The report of a wrong gqa (as `check --json` prints it), graded once: its cases' names and what each checks."""
    report = grader.grade(catalog.get("gqa"), TILED).to_dict()
    assert report["verdict"] == "wrong_answer", report["message"]
    return report


@pytest.mark.parametrize("columns", ["60", None], ids=["60 columns", "piped, no COLUMNS"])
def test_narrow_terminals_and_pipes_keep_the_words(cli, workdir, catalog, tiled_report, columns):
    env = {"COLUMNS": columns}
    shutil.copy(TILED, workdir / "gqa.py")
    r = cli("check", "gqa", env=env)
    assert r.code == 1, r.text
    report = tiled_report
    flat = " ".join(r.out.split())
    assert "not tiled" in flat
    for case in report["cases"]:  # every case's name whole, and what it checks, word for word
        assert re.search(rf"(^|\s){case['name']}\s", r.out), case["name"]
        assert " ".join(case["targets"].split()) in flat, case["targets"]
    if columns:
        table = r.out[:r.out.index("╭")] if "╭" in r.out else r.out
        assert max(len(line) for line in table.splitlines()) <= 60, table

    r = cli("list", env=env)
    for p in catalog.ordered():
        assert re.search(rf"(^|\s){p.id}(\s|$)", r.out, re.M), p.id  # never split
        for tag in p.tags:
            assert re.search(rf"(^|\s){re.escape(tag)}(,|\s|$)", r.out, re.M), (p.id, tag, r.out)
    assert "…" not in r.out and "..." not in r.out
    if columns:
        assert max(len(line) for line in r.out.splitlines()[:-1]) <= 60, r.out  # all but the "Next up" sentence

    r = cli("status", env=env)
    assert re.search(r"gqa\s+attempted", r.out) and "Wrong answer" in r.out, r.out
    assert "…" not in r.out


def test_validate_names_the_case_and_verdict_rejecting_an_alternative(cli, tmp_path):
    pack = tmp_path / "pack"
    shutil.copytree(PACK / "problems" / "good_attention", pack / "problems" / "good_attention")
    for sub, name in (("solutions", "good_attention.py"), ("templates", "good_attention.py.j2")):
        (pack / sub).mkdir(parents=True)
        shutil.copy(PACK / sub / name, pack / sub / name)
    wrong = (pack / "problems" / "good_attention" / "wrong" / "missing_scale.py").read_text()
    (pack / "problems" / "good_attention" / "right" / "not_really.py").write_text(
        wrong.replace("# expect: wrong_answer", "# expect: accepted"))
    r = cli("validate", "good_attention", "--problems-dir", str(pack), "--seeds", "1")
    assert r.code == 1, r.out
    m = re.search(r"not_really\.py was rejected: case '(\w+)', verdict (\w+) on seed (\d+)", r.out)
    assert m, r.out
    case, verdict, seed = m.groups()
    assert verdict == "wrong_answer"
    assert "fix the reference (solutions/good_attention.py) if it is the one that is wrong" in r.out, r.out
    reproduce = re.search(r"reproduce: `torchcode ([^`]+)`", r.out).group(1).split()  # runs as printed
    assert reproduce[-4:] == ["--seed", seed, "--problems-dir", str(pack)], reproduce
    graded = json.loads(cli(*reproduce, "--json").out)
    assert case in [c["name"] for c in graded["cases"] if c["verdict"] == "wrong_answer"]
    assert "einsum.py accepted" in r.out


def test_readme_set_up_commands_pasted_one_after_the_other(tmp_path, torchcode_home):
    """Both set-up commands in one shell, as pasted: the first must leave the shell where it was and
    the user's own progress untouched. Only the installs are stood in for (this venv has torchcode)."""
    readme = (ROOT / "README.md").read_text()
    first, second = re.findall(r"```bash\n(.*?)\n```", readme, re.S)[:2]
    install = "python3 -m venv .venv && . .venv/bin/activate && pip install torch==2.13.0 . && "
    assert first.startswith(install), first
    assert second.startswith("python3 -m venv .venv && . .venv/bin/activate && pip install "), second
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    (checkout / "pyproject.toml").write_text("[project]\nname = 'stand-in'\n")
    script = (f"cd '{checkout}' && true && {first[len(install):]}\n"
              'echo "AFTER-FIRST: $PWD"\n'
              "test -f pyproject.toml && echo SECOND-CAN-INSTALL-HERE\n")
    p = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "NO_COLOR": "1", "TORCHCODE_HOME": str(torchcode_home),
                            "TMPDIR": str(tmp_path)})
    assert "Not implemented yet" in p.stdout and "Accepted" in p.stdout, p.stdout + p.stderr
    assert f"AFTER-FIRST: {checkout}" in p.stdout and "SECOND-CAN-INSTALL-HERE" in p.stdout, p.stdout
    assert not (torchcode_home / "progress.sqlite3").exists()  # the user's progress: nothing recorded
    assert sorted(p.name for p in checkout.iterdir()) == ["pyproject.toml"]  # nothing written in the checkout


def test_ctrl_c_on_a_terminal_erases_the_progress_line(workdir, torchcode_home):
    import select
    import signal
    import time

    (workdir / "sdpa.py").write_text(ENDLESS)
    leader, follower = pty.openpty()
    p = subprocess.Popen([shutil.which("torchcode"), "check", "sdpa"], cwd=workdir, stdin=subprocess.DEVNULL,
                         stdout=follower, stderr=follower, start_new_session=True,
                         env={**os.environ, "NO_COLOR": "1", "COLUMNS": "120"})
    os.close(follower)
    out, sent, deadline = b"", False, time.monotonic() + 120
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 0.1)
        if ready:
            try:
                chunk = os.read(leader, 4096)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        if not sent and re.search(rb"case 1/\d+: \w+, float32  0\.[3-9]s", out):
            os.killpg(p.pid, signal.SIGINT)
            sent = True
    os.close(leader)
    assert sent and p.wait(timeout=30) == 130, out[-500:]
    text = out.decode()
    assert text.endswith("\r\x1b[2Kinterrupted: the check was stopped and nothing was recorded\r\n"), repr(text[-200:])
    assert not (torchcode_home / "progress.sqlite3").exists() or not _attempts(torchcode_home)


def _attempts(home):
    import sqlite3

    con = sqlite3.connect(home / "progress.sqlite3")
    try:
        return con.execute("SELECT * FROM attempts").fetchall()
    finally:
        con.close()


CAUSAL_WITHOUT_DIAGONAL = """import math

import torch


def causal_attention(Q, K, V):
    S = Q.shape[-2]
    s = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    m = torch.ones(S, S, dtype=torch.bool, device=Q.device).tril(-1)  # the diagonal left out
    return torch.softmax(s.masked_fill(~m, float("-inf")), -1) @ V
"""


def test_advice_shared_by_many_failing_cases_is_printed_once(cli, workdir):
    """The classic tril(-1): every case fails with NaN at position 0 and the same advice. Each case keeps its own
    first sentence (what was seen there); the advice is printed once, in the panel (it was under all 14 cases)."""
    (workdir / "causal_attention.py").write_text(CAUSAL_WITHOUT_DIAGONAL)
    r = cli("check", "causal_attention.py", "--problem", "causal_attention", "--seed", "1")
    assert r.code == 1, r.text
    flat = " ".join(r.out.replace("│", " ").split())
    assert flat.count("NaN/inf come from exp() of large scores") == 1, r.out
    assert flat.count("As explained below.") >= 10 and "only position 0 (of 6) is wrong" in flat, r.out


def test_a_case_with_advice_of_its_own_is_explained_before_a_generic_nan(cli, workdir):
    """An inverted mask fails padding_mask with its own advice ('True means may attend') and other cases with NaN
    (every key of a row masked). The report explained the first NaN case, whose message lists the usual causes."""
    shutil.copy(FIXTURES / "sdpa_mask_inverted.py", workdir / "sdpa.py")
    r = cli("check", "sdpa.py", "--problem", "sdpa", "--seed", "5", "--json")
    report = json.loads(r.out)
    assert report["verdict"] == "wrong_answer", r.text
    nan = [c["name"] for c in report["cases"] if "where the expected value is finite" in c["message"]]
    assert nan and report["explained"] == "padding_mask", (report["explained"], nan)


def test_the_progress_line_counts_the_second_pass_as_its_own():
    """The passing cases run again with new values: "case 13/29" then "case 3/18" read as going backwards."""
    from torchcode.render.progress_line import ProgressLine

    line = ProgressLine("gqa.py", enabled=False, limit=5)
    line.event({"event": "case", "name": "long_sequence", "dtype": "float32", "index": 12, "total": 14})
    assert line.doing == "case 13/14: long_sequence, float32" and line.in_case
    line.event({"event": "case", "name": "mqa", "dtype": "float32", "index": 2, "total": 9, "replay": True})
    assert line.doing == "again with new values, case 3/9: mqa, float32" and line.in_case
    line.event({"event": "started"})
    assert not line.in_case

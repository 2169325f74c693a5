"""What reaches the user's terminal: printed output shown inertly, closed pipes, encodings."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, at_once

HOSTILE = Path(__file__).parent / "hostile"
# Sequences the hostile submissions print: none may reach stdout or stderr raw.
RAW = ["\x1b[2J", "\x1b[H", "\x1b[1;32mAccepted", "\x1b[32mAccepted", "\x1b]0;", "\x9b", "\x07", "\u202e", "\r"]


def _raw_in(text: str) -> list[str]:
    return [seq for seq in RAW if seq in text]


@pytest.mark.parametrize("colour", [False, True], ids=["plain", "forced-colour"])
def test_printed_control_sequences_are_shown_escaped(cli, colour):
    env = {"FORCE_COLOR": "1", "NO_COLOR": None} if colour else None
    r = cli("check", str(HOSTILE / "terminal_escapes.py"), "--problem", "sdpa", "--device", "cpu", env=env)
    assert r.code == 1, r.text
    assert _raw_in(r.out) == [] and _raw_in(r.err) == []
    if not colour:
        assert "\x1b" not in r.out  # nothing but what the report itself draws
    assert "\\x1b[2J\\x1b[H\\x1b[1;32mAccepted" in r.out  # shown, escaped
    assert "\\x9b2J\\rAccepted \\u202eAccepted" in r.out
    assert "[bold green]Accepted[/bold green]" in r.out  # rich markup printed literally, not interpreted
    assert "Traceback" not in r.err


def test_exception_messages_and_source_lines_are_shown_escaped(cli):
    path = HOSTILE / "terminal_escapes_in_error.py"
    assert b"\x1b" in path.read_bytes()  # the raising line itself holds a raw ESC (shown in the traceback)
    r = cli("check", str(path), "--problem", "sdpa", "--device", "cpu")
    assert r.code == 1, r.text
    assert "Runtime error" in r.out
    assert "\x1b" not in r.out and _raw_in(r.err) == []
    assert "ValueError: \\x1b[2J\\x1b[H\\x1b[32mAccepted" in r.out
    assert "# \\x1b[2J\\x1b]0;pwned\\x07" in r.out  # the source line, escaped
    assert "[bold green]Accepted[/bold green]" in r.out


def test_json_report_is_inert_and_lossless(cli):
    r = cli("check", str(HOSTILE / "terminal_escapes.py"), "--problem", "sdpa", "--device", "cpu", "--json")
    assert r.code == 1
    assert "\x1b" not in r.out and "\x9b" not in r.out and "\x07" not in r.out
    report = json.loads(r.out)
    assert report["output"].startswith("\x1b[2J\x1b[H\x1b[1;32mAccepted")  # the exact text, JSON-escaped on the wire


def test_a_file_name_with_control_characters_is_shown_escaped(cli, workdir):
    name = "\x1b[2Jsdpa\x07\nWrong.py"  # a newline too: the name never breaks the report's first line
    shutil.copy(HOSTILE / "returns_zeros.py", workdir / name)
    r = cli("check", name, "--problem", "sdpa", "--device", "cpu")
    assert r.code == 1, r.text
    assert "\x1b" not in r.out and "\x07" not in r.out
    assert "\\x1b[2Jsdpa\\x07\\nWrong.py" in r.out.splitlines()[0], r.out


def _torchcode() -> list[str]:
    exe = shutil.which("torchcode")
    return [exe] if exe else [sys.executable, "-m", "torchcode"]


def _into_closed_pipe(args: list[str], cwd: Path) -> tuple[int, str]:
    """Run with stdout a pipe whose reader is already gone: every write hits EPIPE."""
    p = subprocess.Popen(_torchcode() + args, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         stdin=subprocess.DEVNULL)
    p.stdout.close()
    err = p.stderr.read().decode()
    return p.wait(timeout=120), err


@pytest.mark.parametrize("file, code", [("accepted", 0), ("rejected", 1)])
def test_a_closed_pipe_is_not_a_verdict(workdir, torchcode_home, file, code):
    src = ROOT / "solutions" / "sdpa.py" if file == "accepted" else HOSTILE / "returns_zeros.py"
    shutil.copy(src, workdir / "sdpa.py")
    rc, err = _into_closed_pipe(["check", "sdpa.py", "--device", "cpu"], workdir)
    assert rc == code, err
    assert "Traceback" not in err and "Error" not in err, err
    rows = sqlite3.connect(torchcode_home / "progress.sqlite3").execute("SELECT verdict FROM attempts").fetchall()
    assert rows == [("accepted" if code == 0 else "wrong_answer",)]  # the attempt is still recorded


@pytest.mark.parametrize("args", [["list"], ["status"], ["show", "sdpa"], ["check", "sdpa.py", "--device", "cpu", "--json"]])
def test_other_commands_into_a_closed_pipe(workdir, args):
    shutil.copy(ROOT / "solutions" / "sdpa.py", workdir / "sdpa.py")
    rc, err = _into_closed_pipe(args, workdir)
    assert (rc, err) == (0, "")


def test_check_piped_into_head(workdir):
    """`torchcode check | head -1` as a shell runs it: with pipefail, an accepted file still succeeds."""
    shutil.copy(ROOT / "solutions" / "sdpa.py", workdir / "sdpa.py")
    cmd = " ".join(_torchcode()) + " check sdpa.py --device cpu | head -1"
    p = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], cwd=workdir, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("Accepted") and p.stdout.count("\n") == 1
    assert "Traceback" not in p.stderr


ASCII_ENVS = {
    "PYTHONIOENCODING=ascii": {"PYTHONIOENCODING": "ascii"},
    "LANG=C": {"LANG": "C", "LC_ALL": None, "LC_CTYPE": None, "PYTHONIOENCODING": None},
    "no locale at all": {"LANG": None, "LC_ALL": None, "LC_CTYPE": None, "PYTHONIOENCODING": None},
}


@pytest.mark.parametrize("env", ASCII_ENVS.values(), ids=ASCII_ENVS.keys())
def test_ascii_terminals_get_ascii(cli, workdir, env):
    shutil.copy(ROOT / "problems" / "sdpa" / "wrong" / "ignores_mask.py", workdir / "sdpa.py")  # some cases pass
    shutil.copy(ROOT / "solutions" / "sdpa.py", workdir / "ref.py")
    rejected, accepted = at_once(lambda: cli("check", "sdpa.py", "--device", "cpu", env=env),
                                 lambda: cli("check", "ref.py", "--problem", "sdpa", "--device", "cpu", env=env))
    runs = {
        "rejected": rejected,
        "accepted": accepted,
        "status": cli("status", env=dict(env, COLUMNS="60")),  # narrow: cells are cut or folded
        "list": cli("list", env=env),
        "show": cli("show", "sdpa", env=env),
        "hint": cli("hint", "sdpa", env=env),
    }
    for name, r in runs.items():
        assert r.code == (1 if name == "rejected" else 0), (name, r.text)
        assert r.text.isascii(), (name, [c for c in r.text if not c.isascii()][:5])
        assert "Traceback" not in r.err, (name, r.err)
    # a passing case's row, or the row that counts them where the report is long
    assert "\nx  padding_mask" in runs["rejected"].out
    assert re.search(r"\n\+  (batched_3d|\d+ other cases pass)", runs["rejected"].out), runs["rejected"].out
    assert "+-" in runs["rejected"].out  # the panel drawn with ASCII


def test_utf8_terminals_get_the_glyphs(cli, workdir):
    """The control for the test above: with a UTF-8 locale the same checks draw ✓, ✗ and boxes."""
    shutil.copy(HOSTILE / "returns_zeros.py", workdir / "sdpa.py")
    env = {"LANG": "C.UTF-8", "LC_ALL": None, "LC_CTYPE": None, "PYTHONIOENCODING": None}
    r = cli("check", "sdpa.py", "--device", "cpu", env=env)
    assert r.code == 1
    assert "\n✗  batched_3d" in r.out and "╭─" in r.out


def test_locale_decision():
    from torchcode.render.terminal import locale_is_utf8

    assert locale_is_utf8({"LANG": "en_US.UTF-8"}) and locale_is_utf8({"LC_ALL": "de_DE.utf8@euro"})
    assert not locale_is_utf8({"LANG": "C"}) and not locale_is_utf8({}) and not locale_is_utf8({"LC_ALL": "POSIX"})
    assert not locale_is_utf8({"LC_ALL": "C", "LANG": "en_US.UTF-8"})  # LC_ALL wins
    assert not locale_is_utf8({"LANG": "en_US.ISO-8859-1"})
    assert locale_is_utf8({"LC_CTYPE": "en_GB.UTF-8", "LANG": "C"})


def test_inert_escapes_every_control_character():
    from torchcode.render.terminal import inert, inert_name

    controls = "".join(chr(c) for c in [*range(0x20), 0x7f, *range(0x80, 0xa0), 0x202e, 0x2066])
    assert all(0x20 <= ord(c) < 0x7f or c in "\n\t" for c in inert(controls))
    assert inert("a\r\nb\tc") == "a\nb\tc" and inert("x\x1b[2Jy") == "x\\x1b[2Jy" and inert("é✓") == "é✓"
    assert inert_name("a\r\nb\tc\x1b") == "a\\r\\nb\\tc\\x1b" and inert_name("josé/sdpa.py") == "josé/sdpa.py"


@pytest.mark.parametrize("json_", [False, True])
def test_a_lost_grader_connection_is_said_not_a_silent_exit(workdir, torchcode_home, json_):
    """A BrokenPipeError from a socket to one of torchcode's own processes (the terminal's pipes never raise):
    click turned it into exit 1 without a word; it is an error that says what happened, exit 2."""
    shutil.copy(ROOT / "solutions" / "sdpa.py", workdir / "sdpa.py")
    code = ("import sys\nimport torchcode.commands.check as c\n"
            "def run(*a, **k):\n    raise BrokenPipeError(32, 'Broken pipe')\n"
            "c.run = run\nsys.argv = ['torchcode', 'check', 'sdpa'" + (", '--json'" if json_ else "") + "]\n"
            "from torchcode.cli import main\nmain()\n")
    p = subprocess.run([sys.executable, "-c", code], cwd=workdir, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    assert "lost its connection to a process it started (Broken pipe)" in p.stderr and "Traceback" not in p.stderr
    if json_:
        assert json.loads(p.stdout)["exit_code"] == 2


def test_a_long_report_lists_the_failing_cases_and_counts_the_rest(cli, workdir):
    """minimind's 51 cases: a table of every case would bury the failures, so the passing ones are counted."""
    shutil.copy(ROOT / "problems" / "minimind_attention" / "wrong" / "cache_before_rope.py", workdir / "layer.py")
    text, js = at_once(
        lambda: cli("check", "layer.py", "--problem", "minimind_attention", "--device", "cpu", "--seed", "3",
                    env={"COLUMNS": "200"}),
        lambda: cli("check", "layer.py", "--problem", "minimind_attention", "--device", "cpu", "--seed", "3",
                    "--json"))
    assert text.code == js.code == 1, text.text
    cases = json.loads(js.out)["cases"]
    failing = [c["name"] for c in cases if c["verdict"] != "accepted"]
    passing = [c["name"] for c in cases if c["verdict"] == "accepted"]
    assert len(cases) > 30 and failing and passing
    rows = [line.split()[1] for line in text.out.splitlines() if line.startswith(("✓  ", "✗  ", "x  ", "+  "))]
    assert rows[:-1] == failing  # every failing case, in order, and no passing one
    last_row = next(line for line in text.out.splitlines() if line.startswith(("✓  ", "+  ")))
    assert f"{len(passing)} other cases pass (`--json` lists every case)" in last_row

"""Jupyter: real notebooks executed by a real IPython kernel (nbclient + ipykernel).

The notebook `torchcode start gqa --notebook` writes runs as it is (its stub cell is graded:
not implemented yet); a wrong cell shows the wrong-answer report, a fixed one Accepted, and
`%torchcode status` then shows gqa solved. Grading never happens in the kernel: the kernel
never imports torch, and a cell that tampers with its interpreter leaves the kernel untouched.
Attempts land in the same store as the CLI's.
"""

from __future__ import annotations

import importlib
import os
import sqlite3
import sys

import pytest

from conftest import FIXTURES, ROOT



def _need(module: str):
    """Skipped loudly without the package; under CI (which installs the test extra) a failure."""
    try:
        return importlib.import_module(module)
    except ImportError:
        why = f"the Jupyter tests need {module}: pip install -e '.[test]'"
        if os.environ.get("CI"):
            pytest.fail(why + " (CI installs the test extra)", pytrace=False)
        pytest.skip(why, allow_module_level=True)


nbformat = _need("nbformat")
nbclient = _need("nbclient")
_need("ipykernel")

WRONG = (ROOT / "problems" / "gqa" / "wrong" / "tiled_kv_heads.py").read_text()
RIGHT = (ROOT / "solutions" / "gqa.py").read_text()
CPU_MASK = (ROOT / "solutions" / "causal_attention.py").read_text().replace(", device=Q.device", "")
HELPED = "%%torchcode repeat_kv\nfrom myhelpers import rk\n\n\ndef repeat_kv(x, n_rep):\n    return rk(x, n_rep)\n"
HOSTILE = """
import builtins, sys
builtins.TAMPERED = True            # in the kernel this would stick
sys.modules["torch"] = None         # and this would break the kernel's next import
raise SystemExit(0)                 # and this would end it
"""


@pytest.fixture
def jupyter_env(tmp_path, monkeypatch):
    """Jupyter's and IPython's own files go to a temp folder, not the user's."""
    for var, sub in (("JUPYTER_RUNTIME_DIR", "runtime"), ("IPYTHONDIR", "ipython"), ("JUPYTER_DATA_DIR", "data"),
                     ("JUPYTER_CONFIG_DIR", "config")):
        (tmp_path / "jupyter" / sub).mkdir(parents=True)
        monkeypatch.setenv(var, str(tmp_path / "jupyter" / sub))
    monkeypatch.setenv("COLUMNS", "120")


def _execute(nb, cwd):
    client = nbclient.NotebookClient(nb, kernel_name="python3", timeout=300, startup_timeout=180,
                                     allow_errors=False, resources={"metadata": {"path": str(cwd)}})
    client.execute()
    return nb


def _code(source: str):
    return nbformat.v4.new_code_cell(source)


def _text(cell) -> str:
    """What a cell showed: its plain text (displays and streams) and its HTML."""
    parts = []
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            parts.append(out.get("text", ""))
        data = out.get("data", {})
        parts.append(data.get("text/plain", ""))
        parts.append(data.get("text/html", ""))
    return "\n".join(parts)


def _html(cell) -> str:
    return "\n".join(out.get("data", {}).get("text/html", "") for out in cell.get("outputs", []))


def test_start_notebook_writes_statement_stub_and_scratch(cli, workdir):
    r = cli("start", "gqa", "--notebook")
    assert r.code == 0 and "gqa.ipynb" in r.out, r.text
    nb = nbformat.read(workdir / "gqa.ipynb", as_version=4)
    nbformat.validate(nb)
    kinds = [c.cell_type for c in nb.cells]
    assert kinds[0] == "markdown" and "Grouped-Query Attention" in nb.cells[0].source
    assert "n_rep = num_heads // num_kv_heads" in nb.cells[0].source  # the statement's math
    stub = next(c for c in nb.cells if c.cell_type == "code" and c.source.startswith("%%torchcode "))
    assert stub.source.splitlines()[0] == "%%torchcode gqa"
    assert "class GroupQueryAttention(nn.Module):" in stub.source and "NotImplementedError" in stub.source
    assert nb.cells[-1].cell_type == "code" and nb.cells[-1].source == ""  # the scratch cell
    assert any(c.source.strip() == "%load_ext torchcode" for c in nb.cells if c.cell_type == "code")
    assert not (workdir / "gqa.py").exists()
    r = cli("start", "gqa", "--notebook")  # never overwritten silently
    assert r.code == 2 and "already exists" in r.err


def test_a_notebook_of_a_pack_problem_grades_in_jupyter(cli, workdir, torchcode_home, jupyter_env):
    """`start ID --notebook --problems-dir PACK`: the notebook names the pack for its kernel (and the kernel's grading
    session), so its cells grade without the learner setting anything (it said "no problem named 'good_attention'")."""
    pack = FIXTURES / "course_pack"
    assert cli("start", "good_attention", "--notebook", "--problems-dir", str(pack)).code == 0
    nb = nbformat.read(workdir / "good_attention.ipynb", as_version=4)
    assert any(c.source == f"%env TORCHCODE_PROBLEMS={pack.resolve()}\n%load_ext torchcode" for c in nb.cells)
    nb.cells.append(_code("%%torchcode good_attention\n" + (pack / "solutions" / "good_attention.py").read_text()))
    _execute(nb, workdir)
    stub, solved = [c for c in nb.cells if c.source.startswith("%%torchcode good_attention")]
    assert "Not implemented yet" in _text(stub), _text(stub)
    assert "`%torchcode hint good_attention`" in " ".join(_text(stub).split()), _text(stub)  # the magic's form
    assert "Accepted" in _text(solved), _text(solved)


def test_notebook_wrong_then_fixed_then_status(cli, workdir, torchcode_home, jupyter_env):
    assert cli("start", "gqa", "--notebook").code == 0
    nb = nbformat.read(workdir / "gqa.ipynb", as_version=4)
    n = len(nb.cells)
    nb.cells += [
        _code("%%torchcode gqa\n" + WRONG),
        _code("%%torchcode gqa\n" + RIGHT),
        _code("%torchcode status"),
        _code("%torchcode hint gqa"),
        _code("%torchcode show gqa"),
        _code("import sys\nprint('torch imported in the kernel:', 'torch' in sys.modules)"),
    ]
    _execute(nb, workdir)
    stub, wrong, right, status, hint, show, kernel = [nb.cells[n - 2]] + nb.cells[n:]
    assert "Not implemented yet" in _text(stub), _text(stub)

    text = _text(wrong)
    # WRONG tiles the KV heads (0, 1, 0, 1): the group property explains it in the learner's terms
    assert "Wrong answer" in text and "Repeat each KV head n_rep times in a row" in text, text
    assert "%%torchcode gqa --seed" in text and "torchcode check" not in text  # how to reproduce, in the notebook
    assert "Wrong answer" in _html(wrong) and "<pre" in _html(wrong)  # drawn as HTML in the notebook

    text = _text(right)
    assert "Accepted" in text and "All hidden cases pass" in text, text
    assert "Accepted" in _html(right)

    text = _text(status)
    row = next(line for line in text.splitlines() if line.strip("│┃| ").startswith("gqa "))
    assert "solved" in row, text
    assert "Hint 1 of" in _text(hint)
    assert any("text/markdown" in o.get("data", {}) and "Grouped-Query Attention" in o["data"]["text/markdown"]
               for o in show.outputs), show.outputs
    assert "torch imported in the kernel: False" in _text(kernel)

    rows = sqlite3.connect(torchcode_home / "progress.sqlite3").execute(
        "SELECT problem, verdict, file FROM attempts ORDER BY id").fetchall()
    assert rows == [("gqa", "not_implemented", ""), ("gqa", "wrong_answer", ""), ("gqa", "accepted", "")]
    kept = sqlite3.connect(torchcode_home / "progress.sqlite3").execute(
        "SELECT source FROM attempts ORDER BY id").fetchall()
    assert bytes(kept[1][0]) == WRONG.encode() and bytes(kept[2][0]) == RIGHT.encode()  # the cell, for `history`
    assert sqlite3.connect(torchcode_home / "progress.sqlite3").execute(
        "SELECT revealed FROM hints WHERE problem = 'gqa'").fetchone() == (1,)
    r = cli("status")  # the CLI sees the notebook's attempts
    assert "1 solved" in r.out, r.out


def test_a_hostile_cell_never_reaches_the_kernel(workdir, torchcode_home, jupyter_env):
    """A cell that tampers with its interpreter leaves the kernel as it was; usage errors are one line;
    tracebacks name the cell's lines; a kernel that has run torch ops itself still grades."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        _code("%load_ext torchcode"),
        _code("%torchcode hint"),  # nothing graded yet: which problem?
        _code("%%torchcode gqa\n" + HOSTILE),
        _code("import builtins, sys\nprint('tampered:', hasattr(builtins, 'TAMPERED'), 'torch' in sys.modules)"),
        _code("%%torchcode gqa\n" + RIGHT),  # the kernel and its session still grade
        _code("%%torchcode nosuch\nx = 1"),
        _code("%torchcode frobnicate"),
        _code("%%torchcode gqa\nimport torch\n\nclass GroupQueryAttention(torch.nn.Module:\n    pass\n"),
        _code("%%torchcode gqa\n" + RIGHT.replace("    def forward(self, x):\n", "    def forward(self, x):\n        1 / 0\n")),
        _code("%torchcode hint"),
        # the kernel now computes with torch itself (a fork of it could hang): grading still works
        _code("import torch\nx = torch.randn(512, 512)\nprint('ops ran:', float((x @ x).sum()) == float((x @ x).sum()))"),
        _code("%%torchcode gqa\n" + RIGHT),
        _code("%%torchcode causal_attention --gpu-dry-run\n" + CPU_MASK),  # check --gpu-dry-run's advice
        _code(HELPED),
        _code(HELPED),  # the same cell again: the session starts its next worker ahead, for this folder
        _code("%cd other"),
        _code(HELPED),  # imports from the kernel's folder now, not the first one
    ]
    (workdir / "myhelpers.py").write_text(  # the notebook's folder: a cell imports from it, as `check` does
        "def rk(x, n_rep):\n    B, S, H, D = x.shape\n"
        "    return x[:, :, :, None, :].expand(B, S, H, n_rep, D).reshape(B, S, H * n_rep, D)\n")
    (workdir / "other").mkdir()
    (workdir / "other" / "myhelpers.py").write_text("def rk(x, n_rep):\n    return x.repeat(1, 1, n_rep, 1)\n")
    _execute(nb, workdir)
    assert "Accepted" in _text(nb.cells[14]), _text(nb.cells[14])
    moved = _text(nb.cells[16])
    assert "Wrong answer" in moved, moved  # other/myhelpers.py tiles the heads instead of repeating each one
    assert "error: which problem?" in _text(nb.cells.pop(1))
    dry = " ".join(_text(nb.cells[11]).split())  # the advice wraps at the report's width
    assert "Accepted" in dry and "would fail on a GPU" in dry, dry
    assert "this cell, line 12 (`causal = torch.ones(" in dry, dry  # line 11 of the code: 12 of the cell
    assert "Accepted" in _text(nb.cells[12]), _text(nb.cells[12])
    syntax, runtime = _text(nb.cells[6]), _text(nb.cells[7])
    assert "Syntax error" in syntax and "this cell, line 4, column 42" in syntax, syntax  # lines as the cell shows them
    line = RIGHT.splitlines().index("    def forward(self, x):") + 3
    assert "Runtime error" in runtime and f'File "this cell", line {line}, in forward' in runtime, runtime
    assert "torchcode-src" not in syntax + runtime
    hint = _text(nb.cells[8])
    assert "Hint 1 of 3" in hint, hint  # the problem of the last graded cell
    assert "ops ran: True" in _text(nb.cells[9])
    assert "Accepted" in _text(nb.cells[10]), _text(nb.cells[10])
    assert "tampered: False False" in _text(nb.cells[2]), _text(nb.cells[2])
    assert "Accepted" in _text(nb.cells[3]), _text(nb.cells[3])
    assert "error: no problem named 'nosuch'" in _text(nb.cells[4]) and "Traceback" not in _text(nb.cells[4])
    assert "usage: %%torchcode PROBLEM" in _text(nb.cells[5])


def test_the_extension_imports_no_torch_and_nothing_of_jupyter_until_loaded():
    import subprocess

    code = ("import sys, torchcode, torchcode.jupyter, torchcode.session;"
            "print(sorted(m for m in ('torch', 'IPython', 'nbformat', 'watchfiles') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


SLOW = (ROOT / "solutions" / "sdpa.py").read_text().replace(
    "    d_k = Q.size(-1)\n", "    import time\n    time.sleep(1.0)\n    d_k = Q.size(-1)\n")


def test_interrupting_the_kernel_stops_the_grade_and_a_closed_kernel_leaves_nothing(workdir, torchcode_home, jupyter_env):
    """Interrupt (the notebook's stop button) mid-grade: said, nothing recorded, the next cell grades.
    Shutting the kernel down ends its grading session's process too."""
    import time

    from jupyter_client.manager import start_new_kernel

    km, kc = start_new_kernel(kernel_name="python3", startup_timeout=180, cwd=str(workdir))
    try:
        def run(code: str, interrupt_when: str | None = None) -> str:
            msg_id = kc.execute(code)
            seen, interrupted = [], False
            while True:
                msg = kc.get_iopub_msg(timeout=300)
                if msg["parent_header"].get("msg_id") != msg_id:
                    continue
                content = msg["content"]
                seen.append(content.get("text", "") + content.get("data", {}).get("text/plain", "")
                            + content.get("ename", "") + "\n".join(content.get("traceback", [])))
                if interrupt_when and not interrupted and interrupt_when in seen[-1]:
                    km.interrupt_kernel()
                    interrupted = True
                if msg["msg_type"] == "status" and content["execution_state"] == "idle":
                    return "\n".join(seen)

        run("%load_ext torchcode")
        kernel = int(run("import os; print('kernel pid', os.getpid())").split("kernel pid", 1)[1].split()[0])
        out = run("%%torchcode sdpa\n" + SLOW, interrupt_when="starting the grader")  # while torch loads there
        assert "Interrupted: the grade was stopped and nothing was recorded" in out, out
        assert "KeyboardInterrupt" not in out and "Traceback" not in out, out
        # The half-started session's process is not left behind. It may take a moment: a Ctrl-C that lands
        # inside subprocess.Popen leaves no handle to stop it by, and it ends when it sees its socket closed.
        deadline = time.monotonic() + 60
        while _sessions_of(kernel):
            assert time.monotonic() < deadline, "a grading session outlived its interrupted start"
            time.sleep(0.1)
        out = run("%%torchcode sdpa\n" + SLOW, interrupt_when="Grading sdpa: case")
        assert "Interrupted: the grade was stopped and nothing was recorded" in out, out
        assert "KeyboardInterrupt" not in out, out
        assert not (torchcode_home / "progress.sqlite3").exists() or sqlite3.connect(
            torchcode_home / "progress.sqlite3").execute("SELECT count(*) FROM attempts").fetchone() == (0,)
        out = run("%%torchcode sdpa\n" + (ROOT / "solutions" / "sdpa.py").read_text())
        assert "Accepted" in out, out
        out = run("import torchcode.jupyter as j; print('session pid', j._session._proc.pid)")
        pid = int(out.split("session pid", 1)[1].split()[0])
        assert _alive(pid)
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=False)
    deadline = time.monotonic() + 30
    while _alive(pid):
        assert time.monotonic() < deadline, "the grading session outlived its kernel"
        time.sleep(0.1)


def _sessions_of(pid: int) -> list[int]:
    """The live grading-session processes ``pid`` started."""
    from pathlib import Path

    found = []
    for d in Path("/proc").iterdir():
        try:
            if d.name.isdigit() and int((d / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid \
                    and b"torchcode.session.server" in (d / "cmdline").read_bytes() and _alive(int(d.name)):
                found.append(int(d.name))
        except OSError:
            continue
    return found


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False

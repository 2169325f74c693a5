"""Where a new learner or instructor tripped, walking through every feature from README.md and --help alone.

Each test runs the real `torchcode` command (the `cli` fixture) on what such a user typed or saved.
"""

from __future__ import annotations

from conftest import FIXTURES, ROOT, at_once

SOLUTION = (ROOT / "solutions" / "sdpa.py").read_text()


def test_files_saved_by_other_editors_are_read_as_python_reads_them(cli, workdir):
    """A UTF-8 BOM with CRLF line ends and tabs (Windows editors) is valid Python: it was a syntax error. A file in
    another encoding is read as its `coding:` line says; without one it is a syntax error that says what to do
    (it was a runtime error quoting a codec). A name that is not `.py` is read as Python all the same (the worker,
    importing it as `import` would, once failed to start on one)."""
    (workdir / "windows.py").write_bytes(b"\xef\xbb\xbf" + SOLUTION.replace("    ", "\t").replace("\n", "\r\n").encode())
    latin = "# -*- coding: latin-1 -*-\n# r\xe9f\xe9rence\n" + SOLUTION
    (workdir / "declared.py").write_bytes(latin.encode("latin-1"))
    (workdir / "latin.py").write_bytes(latin.split("\n", 1)[1].encode("latin-1"))
    (workdir / "powershell.py").write_bytes(SOLUTION.encode("utf-16"))
    (workdir / "saved as.txt").write_text(SOLUTION)
    windows, declared, undeclared, utf16, txt = at_once(
        *[lambda f=f: cli("check", f, "--problem", "sdpa", "--device", "cpu") for f in
          ("windows.py", "declared.py", "latin.py", "powershell.py", "saved as.txt")])
    assert txt.code == 0 and "Accepted" in txt.out, txt.text
    assert windows.code == 0 and "Accepted" in windows.out, windows.text
    assert declared.code == 0 and "Accepted" in declared.out, declared.text
    assert undeclared.code == 1 and "Syntax error" in undeclared.out, undeclared.text
    said = " ".join(undeclared.out.split())
    assert "not UTF-8 text (byte 0xe9 on line 1): save it as UTF-8" in said, said
    assert "codec" not in said and "Traceback" not in undeclared.text
    assert utf16.code == 1 and "Syntax error" in utf16.out, utf16.text
    assert "UTF-16 text (as Windows PowerShell's `>` writes it): save it as UTF-8" in " ".join(utf16.out.split())


def test_a_folder_or_a_mistyped_file_says_what_to_type(cli, workdir):
    """`check FOLDER` said "no problem named 'FOLDER'"; a mistyped file name got no suggestion; `bench FILE` asked
    for a --problem option bench did not have; `serve FILE` said there was no such folder;
    `watch` with nothing started told how to run `check`."""
    (workdir / "class").mkdir()
    (workdir / "class" / "sdpa.py").write_text(SOLUTION)
    (workdir / "class" / "notes.py").write_text("")
    (workdir / "sdpa.py").write_text(SOLUTION)
    (workdir / "mine.py").write_text(SOLUTION)
    folder, typo, bench_folder, bench_file, bench_both, bench_p, watch_empty, serve_file, watch_none, \
        check_two, check_both, watch_two, empty = at_once(
        lambda: cli("check", "class"),
        lambda: cli("check", "spda.py"),
        lambda: cli("bench", "class/"),
        lambda: cli("bench", "mine.py"),
        lambda: cli("bench", "sdpa", "mine.py", "--problem", "sdpa"),
        lambda: cli("bench", "nosuch.py", "-p", "sdpa"),
        lambda: cli("watch", "."),
        lambda: cli("serve", "sdpa.py", "--no-browser"),
        lambda: cli("watch"),  # nothing started here
        lambda: cli("check", "mine.py", "sdpa", "--device", "cpu"),  # PROBLEM FILE, either way round (it was
        lambda: cli("check", "mine.py", "sdpa", "-p", "sdpa"),       # "unexpected extra argument")
        lambda: cli("watch", "sdpa", "nosuch.py"),
        lambda: cli("check", ""),
    )
    for r in (folder, typo, bench_folder, bench_file, bench_both, bench_p, serve_file, watch_none, empty):
        assert r.code == 2 and r.out == "" and "Traceback" not in r.err, r.text
    assert "class is a folder; name one file in it: `torchcode check class/sdpa.py`. " in folder.err, folder.err
    assert "torchcode grade FOLDER" in folder.err and "notes.py" not in folder.err
    assert "'' (an empty name: this folder) is a folder; name one file in it: `torchcode check sdpa.py`" in empty.err
    assert "no such file: spda.py. Did you mean: sdpa.py?" in typo.err, typo.err
    assert "`torchcode bench class/sdpa.py`" in bench_folder.err, bench_folder.err
    assert "cannot tell which problem mine.py solves: add --problem PROBLEM" in bench_file.err, bench_file.err
    assert "name the problem once" in bench_both.err, bench_both.err
    assert "no such file: nosuch.py" in bench_p.err, bench_p.err  # --problem is an option of bench
    assert "sdpa.py is a file: serve takes the folder that holds your PROBLEM.py files (`torchcode serve .`)" \
        in serve_file.err, serve_file.err  # it said "no such folder"
    assert watch_empty.code == 2 and "in it: `torchcode watch sdpa.py`. " in watch_empty.err, \
        watch_empty.text
    assert "`torchcode watch PROBLEM` or `torchcode watch FILE --problem PROBLEM`" in watch_none.err, watch_none.err
    assert check_two.code == 0 and "Accepted" in check_two.out and "mine.py" in check_two.out, check_two.text
    assert check_both.code == 2 and "name the problem once: `torchcode check sdpa mine.py` or `torchcode check " \
        "mine.py --problem sdpa`" in " ".join(check_both.err.split()), check_both.text
    assert watch_two.code == 2 and "no such file: nosuch.py" in watch_two.err, watch_two.text


def test_a_pack_with_a_broken_problem(cli, workdir):
    """A case function that raises was a traceback for the learner (and for `validate`); the warning about a
    problem with a bad problem.toml showed rich's markup as text: `[yellow]warning:[/yellow]`."""
    pack = str(FIXTURES / "course_pack")
    assert cli("start", "cases_raise", "--problems-dir", pack).code == 0
    r = cli("check", "--problems-dir", pack, "--device", "cpu")
    assert r.code == 2 and "Traceback" not in r.err, r.text
    assert "cases_raise/cases.py: case 'single_token' raised KeyError: 'single' (line 18)" in r.err, r.err
    assert "\nwarning: problem 'bad_spec' is skipped: " in "\n" + r.err and "[yellow]" not in r.err, r.err


def test_a_notebook_named_to_check_says_where_it_is_graded(cli, workdir):
    """`check ID.ipynb` graded the notebook's JSON as Python (a NameError on `null`); starting the notebook again
    advised `torchcode reset`, which restores the .py file, never the notebook."""
    assert cli("start", "sdpa", "--notebook").code == 0
    again, check, watch = at_once(lambda: cli("start", "sdpa", "--notebook"), lambda: cli("check", "sdpa.ipynb"),
                                  lambda: cli("watch", "sdpa.ipynb"))
    assert again.code == 2 and "Use `torchcode start sdpa --notebook --force` (keeps a backup)" in again.err, again.err
    for r, command in ((check, "check"), (watch, "watch")):
        assert r.code == 2 and r.out == "", r.text
        assert (f"sdpa.ipynb is a notebook: run its `%%torchcode sdpa` cell in Jupyter to grade it. `torchcode {command}` "
                "grades a Python file: `torchcode start sdpa` writes sdpa.py") in r.err, r.err


def test_limits_and_bench_arguments_out_of_range_are_usage_errors(cli, workdir):
    """`--total-time-limit 0` blamed the learner's file ("importing your file took longer than 0 s"), `--time-limit 0`
    was silently the problem's own limit, `bench --reps 0` graded first and failed after; `new sdpa` wrote a pack
    whose problem clashes with the built-in one ("it validates as written", then every command refused the pack);
    `--dtype all --dtype float16` said "--dtype must be one of float32, bfloat16, float16 or all, not all"."""
    (workdir / "sdpa.py").write_text(SOLUTION)
    runs = at_once(*[lambda a=a: cli(*a.split()) for a in (
        "check sdpa --time-limit 0", "check sdpa --total-time-limit 0 --json", "check sdpa --memory-limit -5",
        "watch sdpa --time-limit -1", "grade . --time-limit inf", "bench sdpa --reps 0", "bench sdpa --sizes 0,5",
        "new sdpa --dir pack", "check sdpa --dtype all --dtype float16")])
    said = [r.err.strip() for r in runs]
    assert all(r.code == 2 for r in runs) and "Traceback" not in "".join(said), said
    assert said == ["error: --time-limit must be a number of seconds above 0, not 0",
                    "error: --total-time-limit must be a number of seconds above 0, not 0",
                    "error: --memory-limit must be a number of MB above 0, not -5",
                    "error: --time-limit must be a number of seconds above 0, not -1",
                    "error: --time-limit must be a number of seconds above 0, not inf",
                    "error: --reps must be at least 1, not 0",
                    "error: --sizes must be whole numbers of at least 1, not 0,5",
                    "error: 'sdpa' is already a built-in problem, and an id defined twice is an error: pick another id",
                    "error: --dtype all already grades every dtype sdpa declares: give it alone, not with float16"]
    assert runs[1].out.strip() == '{"error": "--total-time-limit must be a number of seconds above 0, not 0", "exit_code": 2}'
    assert not (workdir / "pack").exists()


def test_start_into_a_folder_and_check_of_a_problem_not_started(cli, workdir):
    """`start sdpa -o sub` refused (the folder "already exists"; --force would have written over a folder); `check -p
    gqa` with no gqa.py said "no such file: /abs/path/gqa.py", after importing torch, where `check gqa` says what to do."""
    (workdir / "sub").mkdir()
    py, nb, check = at_once(lambda: cli("start", "sdpa", "-o", "sub"), lambda: cli("start", "rope", "-o", "sub", "--notebook"),
                            lambda: cli("check", "-p", "gqa"))
    assert py.code == 0 and "Wrote sub/sdpa.py" in py.out, py.text
    assert nb.code == 0 and "Wrote sub/rope.ipynb" in nb.out, nb.text
    assert (workdir / "sub" / "sdpa.py").is_file() and (workdir / "sub" / "rope.ipynb").is_file()
    assert check.code == 2 and check.err.strip() == ("error: no file gqa.py to check. Run `torchcode start gqa` first, "
                                                     "or `torchcode check FILE --problem gqa`."), check.err
    r = cli("start", "gqa", "-o", "new/")  # a folder not made yet, named with its slash: gqa.py in it, not a file "new"
    assert r.code == 0 and "Wrote new/gqa.py" in r.out and (workdir / "new" / "gqa.py").is_file(), r.text


def test_help_says_what_new_and_validate_take(cli, workdir):
    """`new --help` said "a Python identifier", and `new Foo` (one) is refused; `validate --help` said "default: all"
    where, with --problems-dir, it validates the pack's problems only."""
    new_help, refused, validate_help = at_once(lambda: cli("new", "--help"), lambda: cli("new", "Foo"),
                                               lambda: cli("validate", "--help"))
    assert "lower-case letters, digits and underscores, starting with a letter" in " ".join(new_help.out.split())
    assert refused.code == 2 and "use lower-case letters, digits and underscores" in refused.err, refused.text
    assert "(default: all; with --problems-dir, the pack's)" in " ".join(validate_help.out.split()), validate_help.out


HELPER = """def rk(x, n_rep):
    B, S, H, D = x.shape
    return x[:, :, :, None, :].expand(B, S, H, n_rep, D).reshape(B, S, H * n_rep, D)
"""
USES_HELPER = "from myhelpers import rk\n\n\ndef repeat_kv(x, n_rep):\n    return rk(x, n_rep)\n"


def test_a_helper_module_beside_the_file_imports_where_the_progress_store_is_too(cli, workdir):
    """README's demo keeps TORCHCODE_HOME inside the working folder: the worker could then read the learner's
    file alone, and `import myhelpers` from beside it failed (check, watch and serve: one worker). It works
    now, and the progress store in that folder stays out of reach."""
    env = {"TORCHCODE_HOME": str(workdir / "home")}
    (workdir / "myhelpers.py").write_text(HELPER)
    (workdir / "repeat_kv.py").write_text(USES_HELPER)
    (workdir / "snoop.py").write_text(
        "import os\n\nhere = os.path.dirname(os.path.abspath(__file__))\ntry:\n"
        "    open(os.path.join(here, 'home', 'progress.sqlite3'), 'rb').read(16)\n    said = 'STORE READ'\n"
        "except OSError as e:\n    said = 'store refused: ' + type(e).__name__\n\n\n"
        "def repeat_kv(x, n_rep):\n    raise RuntimeError(said)\n")
    assert cli("hint", "repeat_kv", env=env).code == 0  # the store, in the folder (no torch: fast)
    assert (workdir / "home" / "progress.sqlite3").is_file()
    helped, snoop = at_once(lambda: cli("check", "repeat_kv.py", "--device", "cpu", env=env),
                            lambda: cli("check", "snoop.py", "--problem", "repeat_kv", "--device", "cpu", env=env))
    assert helped.code == 0 and "Accepted" in helped.out, helped.text
    assert snoop.code == 1 and "store refused: PermissionError" in snoop.out and "STORE READ" not in snoop.out, snoop.text

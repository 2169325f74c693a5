"""The command line: argument parsing only. Each command calls one function in torchcode.commands.

Errors a user can fix (``TorchcodeError``) become one message and exit code 2 here,
at the only boundary; a verdict is not an error (``check`` exits 1 on a rejection).
"""

# No `from __future__ import annotations` here: typer would evaluate every string annotation of every
# command on each run (about 20 ms of `list` with 15 commands); real annotations cost nothing then.

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from torchcode.errors import TorchcodeError

app = typer.Typer(
    name="torchcode",
    help="Practice PyTorch attention kernels: start a problem, fill it in, check it against hidden cases.",
    no_args_is_help=True,
    add_completion=True,  # --install-completion / --show-completion (typer's own; costs nothing until used)
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)

def _plain_usage() -> None:
    """typer writes a required argument as ``{problem}`` in usage lines; write it ``PROBLEM``, as click does
    (an argument without a metavar of its own is named in capitals)."""
    import re

    from typer.core import TyperArgument

    original = TyperArgument.make_metavar

    def make_metavar(self, *args, **kwargs):
        var = re.sub(r"^\{([^{}]*)\}", r"\1", original(self, *args, **kwargs))
        return var if self.metavar is not None else var.upper()

    TyperArgument.make_metavar = make_metavar


_plain_usage()

PacksOpt = Annotated[Optional[list[Path]], typer.Option(
    "--problems-dir", help="An extra problem pack (a folder with problems/, solutions/, templates/). Repeatable.")]
ProblemArg = Annotated[str, typer.Argument(
    metavar="PROBLEM", help="Problem id or the number `torchcode list` prints, e.g. gqa or 10.")]
LastProblemArg = Annotated[Optional[str], typer.Argument(
    metavar="[PROBLEM]", show_default=False,
    help="Problem id or number. Default: the problem started last in this directory.")]
FileArg = Annotated[Optional[str], typer.Argument(
    metavar="[FILE]", show_default=False, help="With a problem id as TARGET: the file to grade (`check gqa my_gqa.py`).")]


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        typer.echo(f"torchcode {version('torchcode')}")
        raise typer.Exit(0)


@app.callback()
def _root(version: Annotated[bool, typer.Option(
        "--version", is_eager=True, callback=_version, help="Print torchcode's version and exit.")] = False):
    """Practice PyTorch attention kernels: start a problem, fill it in, check it against hidden cases."""


@app.command("list")
def list_(tag: Annotated[Optional[str], typer.Option(help="Only problems with this tag.")] = None,
          difficulty: Annotated[Optional[str], typer.Option(help="easy, medium or hard.")] = None,
          problems_dir: PacksOpt = None):
    """List the problems with your status, grouped by topic, and suggest the next one."""
    from torchcode.commands import listing

    raise typer.Exit(listing.run(problems_dir, tag, difficulty))


@app.command()
def show(problem: ProblemArg, problems_dir: PacksOpt = None):
    """Show a problem's statement: math, shapes, signature, constraints, an example."""
    from torchcode.commands import show as cmd

    raise typer.Exit(cmd.run(problem, problems_dir))


@app.command()
def start(problem: ProblemArg,
          file: Annotated[Optional[str], typer.Option("--file", "-o", metavar="PATH", help="Where to write the stub (default ./PROBLEM.py, or ./PROBLEM.ipynb with --notebook; a folder, or a name ending in /: PROBLEM.py in it).")] = None,
          force: Annotated[bool, typer.Option("--force", help="Overwrite an existing file (a backup is kept).")] = False,
          notebook: Annotated[bool, typer.Option("--notebook", help="Write a Jupyter notebook PROBLEM.ipynb instead.")] = False,
          problems_dir: PacksOpt = None):
    """Write a stub file for PROBLEM in this directory."""
    from torchcode.commands import start as cmd

    raise typer.Exit(cmd.start(problem, file, force, problems_dir, notebook))


@app.command()
def check(target: Annotated[Optional[str], typer.Argument(
              metavar="[TARGET]", show_default=False, help="A problem id or a file. Default: the problem started last in this directory.")] = None,
          file: FileArg = None,
          problem: Annotated[Optional[str], typer.Option("--problem", "-p", help="The problem FILE solves.")] = None,
          seed: Annotated[Optional[int], typer.Option(help="Reproduce a run: the seed printed on failure.")] = None,
          json_: Annotated[bool, typer.Option("--json", help="Print one JSON report and nothing else on stdout.")] = False,
          time_limit: Annotated[Optional[float], typer.Option(help="Seconds per hidden case (default: the problem's).")] = None,
          total_time_limit: Annotated[float, typer.Option(help="Seconds for the whole check.")] = 120.0,
          memory_limit: Annotated[int, typer.Option(help="MB your code's process may take beyond what it holds at start (on the CPU: address space; on a GPU: host memory).")] = 6144,
          device: Annotated[str, typer.Option(help="auto (CUDA when available), cpu or cuda.", envvar="TORCHCODE_DEVICE")] = "auto",
          dtype: Annotated[Optional[list[str]], typer.Option(
              help="Grade in this dtype (repeatable; 'all' = every dtype the problem declares). "
                   "Default: float32 on CPU, all declared dtypes on CUDA.")] = None,
          gpu_dry_run: Annotated[bool, typer.Option(
              "--gpu-dry-run", help="On the CPU: if accepted, also say whether your code would run on a GPU "
                                    "(a dry run without data; a few seconds more).")] = False,
          problems_dir: PacksOpt = None):
    """Grade your solution on hidden cases. Exit code: 0 accepted, 1 rejected, 2 could not run."""
    from torchcode.commands import check as cmd
    from torchcode.grader.limits import Limits

    limits = Limits(time_limit=time_limit, total_limit=total_time_limit, memory_mb=memory_limit, device=device)
    raise typer.Exit(cmd.run(target, problem, seed, json_, limits, problems_dir, dtype, gpu_dry_run, file))


@app.command()
def watch(target: Annotated[Optional[str], typer.Argument(
              metavar="[TARGET]", show_default=False, help="A problem id or a file. Default: the problem started last in this directory.")] = None,
          file: FileArg = None,
          problem: Annotated[Optional[str], typer.Option("--problem", "-p", help="The problem FILE solves.")] = None,
          seed: Annotated[Optional[int], typer.Option(help="Grade every save on this seed (default: a new one each time).")] = None,
          time_limit: Annotated[Optional[float], typer.Option(help="Seconds per hidden case (default: the problem's).")] = None,
          device: Annotated[str, typer.Option(help="auto (CUDA when available), cpu or cuda.", envvar="TORCHCODE_DEVICE")] = "auto",
          dtype: Annotated[Optional[list[str]], typer.Option(help="Grade in this dtype (repeatable; 'all'), as for check.")] = None,
          gpu_dry_run: Annotated[bool, typer.Option("--gpu-dry-run", help="On the CPU: if accepted, also say whether your code would run on a GPU (a dry run without data; a few seconds more).")] = False,
          problems_dir: PacksOpt = None):
    """Re-grade your solution every time you save it, in a warm grader (torch is not imported again). Ctrl-C stops."""
    from torchcode.commands import watch as cmd
    from torchcode.grader.limits import Limits

    raise typer.Exit(cmd.run(target, problem, seed, Limits(time_limit=time_limit, device=device), problems_dir, dtype,
                             gpu_dry_run, file))


@app.command()
def bench(target: Annotated[Optional[str], typer.Argument(
              metavar="[TARGET]", show_default=False, help="A problem id or a file (as for check).")] = None,
          file: FileArg = None,
          problem: Annotated[Optional[str], typer.Option("--problem", "-p", help="The problem FILE solves (as for check).")] = None,
          device: Annotated[str, typer.Option(help="auto, cpu or cuda.", envvar="TORCHCODE_DEVICE")] = "auto",
          dtype: Annotated[str, typer.Option(help="float32, bfloat16 or float16.")] = "float32",
          sizes: Annotated[Optional[str], typer.Option(help="Comma-separated sizes (default: the problem's).")] = None,
          reps: Annotated[int, typer.Option(help="Timed repetitions per size (median).")] = 5,
          json_: Annotated[bool, typer.Option("--json", help="Print one JSON report and nothing else on stdout.")] = False,
          problems_dir: PacksOpt = None):
    """Benchmark a correct kernel against the reference and PyTorch's fused kernel: time, peak memory, growth."""
    from torchcode.commands import bench as cmd
    from torchcode.errors import UsageError
    from torchcode.grader.limits import Limits

    try:
        size_list = [int(x) for x in sizes.split(",")] if sizes else None
    except ValueError:
        raise UsageError(f"--sizes must be comma-separated integers, not {sizes!r}") from None
    raise typer.Exit(cmd.run(target, problem, Limits(device=device), dtype, size_list, reps, json_, problems_dir,
                             file))


@app.command()
def hint(problem: LastProblemArg = None,
         all_: Annotated[bool, typer.Option("--all", help="Show every hint revealed so far, without revealing more.")] = False,
         problems_dir: PacksOpt = None):
    """Reveal the next hint for PROBLEM (hints go from a nudge to nearly the answer)."""
    from torchcode.commands import hint as cmd

    raise typer.Exit(cmd.run(problem, all_, problems_dir))


@app.command()
def status(problems_dir: PacksOpt = None):
    """Your progress: solved, attempted, todo, attempts, best time, last verdict."""
    from torchcode.commands import status as cmd

    raise typer.Exit(cmd.run(problems_dir))


@app.command()
def reset(problem: LastProblemArg = None,
          progress: Annotated[bool, typer.Option(
              "--progress", help="Forget PROBLEM's recorded attempts instead (your file and hints stay).")] = False,
          yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation (--progress).")] = False,
          problems_dir: PacksOpt = None):
    """Restore the stub for PROBLEM; your current file is kept as a backup. --progress forgets its attempts."""
    if progress:
        from torchcode.commands import history as cmd

        raise typer.Exit(cmd.forget(problem, yes, problems_dir))
    from torchcode.commands import start as cmd

    raise typer.Exit(cmd.reset(problem, problems_dir))


@app.command()
def history(problem: LastProblemArg = None,
            show: Annotated[Optional[int], typer.Option(metavar="N", help="Print the source of attempt N.")] = None,
            diff: Annotated[Optional[tuple[int, int]], typer.Option(
                metavar="N M", help="Show what changed from attempt N to attempt M.")] = None,
            json_: Annotated[bool, typer.Option("--json", help="The attempts as one JSON object.")] = False,
            problems_dir: PacksOpt = None):
    """Your attempts at PROBLEM: time, verdict, cases passed, seed, duration; the source of each."""
    from torchcode.commands import history as cmd

    raise typer.Exit(cmd.run(problem, show, diff, problems_dir, json_))


@app.command()
def solution(problem: ProblemArg,
             yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
             problems_dir: PacksOpt = None):
    """Print the reference solution (asks first unless you have solved the problem)."""
    from torchcode.commands import solution as cmd

    raise typer.Exit(cmd.run(problem, yes, problems_dir))


@app.command()
def new(problem: Annotated[str, typer.Argument(metavar="PROBLEM", help="The new problem's id: lower-case letters, digits and underscores, starting with a letter.")],
        kind: Annotated[str, typer.Option(help="function or module")] = "function",
        dir_: Annotated[Path, typer.Option("--dir", help="The pack folder to create it in.")] = Path("."),
        title: Annotated[Optional[str], typer.Option(help="The problem's title.")] = None):
    """Scaffold a new problem (spec, statement, cases, reference, stub template, variants) in a pack."""
    from torchcode.commands import new as cmd

    raise typer.Exit(cmd.run(problem, kind, dir_, title))


@app.command()
def validate(problems: Annotated[Optional[list[str]], typer.Argument(metavar="[PROBLEM]...", show_default=False, help="Problem ids (default: all; with --problems-dir, the pack's).")] = None,
             seeds: Annotated[int, typer.Option(help="How many seeds the reference must pass on.")] = 3,
             no_variants: Annotated[bool, typer.Option(
                 "--no-variants", help="Do not grade the known-wrong and correct variants (a quick check while "
                                       "writing cases; nor the reference in low precision; a problem is proved only with them).")] = False,
             problems_dir: PacksOpt = None):
    """Check problems: spec, statement, stub, reference on several seeds, known-wrong and correct variants, time."""
    from torchcode.commands import validate as cmd

    raise typer.Exit(cmd.run(problems, problems_dir, seeds, not no_variants))


@app.command()
def serve(directory: Annotated[Optional[Path], typer.Argument(
              help="The folder whose PROBLEM.py files the browser edits (default: this one).")] = None,
          port: Annotated[Optional[int], typer.Option(help="Port to listen on (default: 8765 or the next free one; 0: any).")] = None,
          no_browser: Annotated[bool, typer.Option("--no-browser", help="Print the URL, do not open a browser.")] = False,
          host: Annotated[str, typer.Option(help="Address to listen on. Anything but loopback needs --allow-remote.")] = "127.0.0.1",
          allow_remote: Annotated[bool, typer.Option("--allow-remote", help="Allow --host to be reachable from other machines.")] = False,
          device: Annotated[str, typer.Option(help="Where checks run: auto (CUDA when available), cpu or cuda.", envvar="TORCHCODE_DEVICE")] = "auto",
          gpu_dry_run: Annotated[bool, typer.Option("--gpu-dry-run", help="Tick the page's 'GPU dry run' box at the start: on the CPU, an accepted check also says whether the code would run on a GPU.")] = False,
          problems_dir: PacksOpt = None):
    """A browser workspace: problem list, statement, editor and Check, on 127.0.0.1 behind a token."""
    from torchcode.commands import serve as cmd

    raise typer.Exit(cmd.run(directory, port, no_browser, host, allow_remote, problems_dir, device, gpu_dry_run))


@app.command()
def grade(submissions: Annotated[Path, typer.Argument(help="A folder with one folder per student holding PROBLEM.py files, or a zip of it.")],
          out: Annotated[Path, typer.Option("--out", "-o", help="Where grades.csv, grades.json, feedback/ and the gradebook go.")] = Path("grades"),
          problems: Annotated[Optional[list[str]], typer.Option("--problems", help="Grade only these problems: ids or the numbers `torchcode list` prints (repeatable, or separated by commas or spaces; default: every problem some student submitted).")] = None,
          workers: Annotated[Optional[int], typer.Option(help="Warm grading sessions in parallel (default: one per core; with --ray, actors).")] = None,
          seed: Annotated[Optional[int], typer.Option(help="The seed of the hidden inputs, the same for every student (default: the gradebook's, else random).")] = None,
          feedback: Annotated[str, typer.Option(help="Per-student feedback files: full (what check shows), summary (verdicts only) or none.")] = "full",
          ray: Annotated[bool, typer.Option("--ray", help="Grade on a Ray cluster: a local one started for this run unless --ray-address is given.")] = False,
          ray_address: Annotated[Optional[str], typer.Option(help="The Ray cluster to join (HOST:PORT or ray://HOST:PORT; implies --ray).")] = None,
          bench: Annotated[bool, typer.Option("--bench", help="Also time each accepted kernel against the reference: a speed ranking per problem.")] = False,
          time_limit: Annotated[Optional[float], typer.Option(help="Seconds per hidden case (default: the problem's).")] = None,
          total_time_limit: Annotated[float, typer.Option(help="Seconds for one submission's whole check.")] = 120.0,
          memory_limit: Annotated[int, typer.Option(help="MB a submission's process may take beyond what it holds at start (CPU: address space; GPU: host memory).")] = 6144,
          device: Annotated[str, typer.Option(help="auto (CUDA when available), cpu or cuda.", envvar="TORCHCODE_DEVICE")] = "auto",
          dtype: Annotated[Optional[list[str]], typer.Option(help="Grade in this dtype (repeatable), as for check.")] = None,
          gpu_dry_run: Annotated[bool, typer.Option("--gpu-dry-run", help="On the CPU: an accepted kernel's feedback also says whether it would run on a GPU (a dry run without data; about a second more each).")] = False,
          problems_dir: PacksOpt = None):
    """Grade a whole class: every student's files, on a pool of warm grading sessions; CSV, JSON, feedback, summary."""
    from torchcode.classroom.run import Options
    from torchcode.commands import grade as cmd
    from torchcode.grader.limits import Limits

    limits = Limits(time_limit=time_limit, total_limit=total_time_limit, memory_mb=memory_limit, device=device)
    raise typer.Exit(cmd.run(Options(submissions=submissions, out=out, problems=problems, workers=workers, seed=seed,
                                     feedback=feedback, limits=limits, dtypes=dtype, problems_dirs=problems_dir,
                                     ray=ray, ray_address=ray_address, bench=bench, gpu_dry_run=gpu_dry_run)))


def main() -> None:
    """The boundary: user errors become one message (exit 2), Ctrl-C one message (exit 130), a closed
    pipe nothing at all (the command keeps its own exit code), and output never crashes on encoding."""
    from torchcode.commands import interrupts
    from torchcode.render import terminal

    terminal.setup()
    interrupts.install()
    try:
        code = _run()
        interrupted = interrupts.settle()
    except KeyboardInterrupt:  # the one KeyboardInterrupt, raised on the way out of _run
        interrupted = True
    if interrupted:  # however it travelled (typer turns Ctrl-C into a bare exit 130)
        print(interrupts.message, file=sys.stderr)
        code = 130
    terminal.finish()
    sys.exit(code)


def _run():
    args = sys.argv[1:]
    as_json = args[:1] in (["check"], ["bench"]) and "--json" in args[1:]
    try:
        if as_json:  # errors too are one JSON object on stdout, argument errors included
            return _run_json()
        app()
    except SystemExit as e:
        if e.code == 1 and isinstance(e.__context__, (BrokenPipeError, ConnectionResetError)):
            return _lost_contact(e.__context__, as_json)  # click exits 1 on EPIPE, without a word
        return e.code
    except TorchcodeError as e:
        _error(str(e), as_json, e.exit_code)
        return e.exit_code
    except KeyboardInterrupt:
        return 130
    except (BrokenPipeError, ConnectionResetError) as e:  # --json: click's standalone mode is off
        return _lost_contact(e, as_json)
    except FileNotFoundError:
        if not _cwd_gone():
            raise  # a bug: its traceback is kept
        _error("the current folder no longer exists (it was deleted or replaced since this shell went there): "
               "`cd` to a folder that exists (`cd \"$PWD\"` if it was recreated) and run the command again",
               as_json, 2)
        return 2
    return 0


def _cwd_gone() -> bool:
    import os

    try:
        os.getcwd()
    except FileNotFoundError:
        return True
    return False


def _lost_contact(e: OSError, as_json: bool) -> int:
    """The terminal's own pipes never raise (render.terminal); this is a socket to a process torchcode started."""
    _error(f"torchcode lost its connection to a process it started ({e.strerror or e}). This is a problem with "
           "torchcode or this machine, not with your code; try again.", as_json, 2)
    return 2


def _run_json():
    """``app()`` with click's argument errors raised here rather than printed as usage text."""
    try:
        from typer._click.exceptions import ClickException  # typer >= 0.28 carries its own click
    except ImportError:
        from click.exceptions import ClickException
    try:
        return app(standalone_mode=False)
    except typer.Abort:
        return 130
    except ClickException as e:
        _error(e.format_message(), True, e.exit_code)
        return e.exit_code


def _error(message: str, as_json: bool, code: int) -> None:
    from torchcode.render.terminal import inert

    if as_json:
        import json

        print(json.dumps({"error": message, "exit_code": code}), flush=True)
    print(f"error: {inert(message)}", file=sys.stderr)

"""`torchcode bench`: grade, then time the learner's kernel against the reference and a fused baseline."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

from torchcode.commands.common import catalog, display_path, learner_file, resolve_target, store
from torchcode.errors import UsageError
from torchcode.render import console, err_console
from torchcode.render.terminal import inert


def run(target: str | None, problem: str | None, limits, dtype: str, sizes: list[int] | None, reps: int,
        as_json: bool, problems_dirs: list[Path] | None, file: str | None = None) -> int:
    if reps < 1:
        raise UsageError(f"--reps must be at least 1, not {reps}")
    if sizes is not None and (not sizes or min(sizes) < 1):
        raise UsageError(f"--sizes must be whole numbers of at least 1, not {','.join(map(str, sizes))}")
    cat = catalog(problems_dirs)
    spec, path = resolve_target(cat, store(), target, problem, "bench", file)
    if not spec.benchmarked and not sizes:  # said before grading, in the learner's terms
        timed = ", ".join(p.id for p in cat.ordered() if p.benchmarked) or "none here"
        raise UsageError(f"{spec.id} has no benchmark: `torchcode bench` times the problems whose speed is the "
                         f"lesson ({timed}). `torchcode check` says whether {spec.id} is right.")
    if dtype not in spec.grading.dtypes:
        raise UsageError(f"{spec.id} is not graded in {dtype}; it declares {', '.join(spec.grading.dtypes)}")
    from torchcode.grader.bench import bench_sizes, run_bench
    from torchcode.grader.judge import Grader, resolve_device

    with Grader(limits) as grader:  # Ctrl-C: the CLI boundary says "interrupted" and exits 130
        limits.device = resolve_device(limits.device)
        graded = grader.grade(spec, path, dtypes=[dtype])
        if not graded.passed:
            from torchcode.render import verdict_label

            from torchcode.paths import builtin_pack

            what = verdict_label(graded.verdict.value)[1].lower()  # "not implemented yet", not not_implemented
            pack = "" if spec.pack.resolve() == builtin_pack().resolve() else f" --problems-dir {display_path(spec.pack)}"
            own = path.resolve() == learner_file(store(), spec, Path.cwd()).resolve()  # the file `check ID` grades
            command = f"{spec.id}{pack}" if own else f"{shlex.quote(display_path(path))} --problem {spec.id}{pack}"
            if dtype != "float32" or limits.device != "cpu":  # graded as bench graded it
                command += f" --device {limits.device} --dtype {dtype}"
            said = graded.message.rstrip(".")
            said = said if said.lower().startswith(what) else f"{what}: {said}"  # "not implemented yet: ..." once
            err_console().print(inert(f"{display_path(path)} is not accepted ({said}). "
                                      f"Only correct kernels are benchmarked: run `torchcode check {command}` first."),
                                markup=False, highlight=False)
            return 1
        if as_json or not sys.stderr.isatty():
            report = run_bench(grader, spec, path, dtype=dtype, sizes=sizes, reps=reps)
        else:
            from rich.progress import Progress

            with Progress(console=err_console(), transient=True) as bar:
                task = bar.add_task("benchmarking", total=max(len(bench_sizes(spec, limits.device, sizes)), 1))
                report = run_bench(grader, spec, path, dtype=dtype, sizes=sizes, reps=reps,
                                   on_step=lambda i, n, label: bar.update(task, completed=i, description=label))
    if as_json:
        sys.stdout.write(json.dumps(report.to_dict(), indent=2) + "\n")
    else:
        from torchcode.render.bench import table

        table(console(), report, display_path(path))
    return 0

"""`bench`: time a correct learner kernel against the reference and a fused PyTorch baseline.

Only kernels that pass grading are benchmarked. The learner's kernel runs in the sandboxed
worker (it only ever runs there); the reference and the baseline run here, on the same
inputs. Each size gets one memory pass (largest allocation on CPU, max_memory_allocated on
CUDA) and median-of-reps timing after warm-up (CUDA events on a GPU).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

from torchcode.catalog.spec import ProblemSpec
from torchcode.errors import UsageError
from torchcode.grader import cases as caseapi
from torchcode.grader import execute, guards, protocol, verdict


@dataclass
class BenchRow:
    size: int
    learner_s: float
    reference_s: float
    learner_peak: int
    reference_peak: int
    baseline_s: float | None = None
    baseline_peak: int | None = None

    @property
    def ratio(self) -> float:
        return self.learner_s / self.reference_s if self.reference_s else float("inf")


@dataclass
class BenchReport:
    problem: str
    file: str
    device: str
    dtype: str
    reps: int
    rows: list[BenchRow] = field(default_factory=list)

    def growth(self, attr: str) -> list[float | None]:
        """Empirical exponent k in cost ~ size^k between consecutive sizes (2 = quadratic)."""
        out: list[float | None] = [None]
        for a, b in zip(self.rows, self.rows[1:]):
            x, y = getattr(a, attr), getattr(b, attr)
            out.append(math.log(y / x) / math.log(b.size / a.size) if x and y and b.size != a.size else None)
        return out

    def to_dict(self) -> dict:
        d = asdict(self)
        for row, r in zip(d["rows"], self.rows):
            row["ratio"] = r.ratio
        d["learner_peak_exponent"] = self.growth("learner_peak")
        d["learner_time_exponent"] = self.growth("learner_s")
        return d


def bench_sizes(spec: ProblemSpec, device: str, sizes: list[int] | None = None) -> list[int]:
    """The sizes to run: those asked for, else the problem's for this device, else its CPU ones."""
    return list(sizes or spec.bench_sizes.get(device) or spec.bench_sizes.get("cpu") or ())


def run_bench(grader, spec: ProblemSpec, path: Path, *, dtype: str = "float32", sizes: list[int] | None = None,
              warmup: int = 2, reps: int = 5, seed: int = 0, on_step=None) -> BenchReport:
    problem = grader.problem(spec)
    if problem.bench_builder is None:
        raise UsageError(f"{spec.id} has no benchmark (its cases.py defines no @benchmark builder)")
    device = grader.limits.device
    sizes = bench_sizes(spec, device, sizes)
    if not sizes:
        raise UsageError(f"{spec.id} declares no benchmark sizes for {device} ([bench] {device} = [...] in problem.toml)")
    low = protocol.DTYPES[dtype]
    to_low = lambda t: t.to(low) if t.is_floating_point() else t  # noqa: E731
    report = BenchReport(spec.id, str(path), device, dtype, reps)
    from torchcode.grader.judge import threads

    with grader.loaded_worker(spec, path, dtype) as worker, threads(grader.limits.threads):
        for i, size in enumerate(sizes):
            rng = caseapi.Rng(caseapi.case_seed(seed, f"bench/{size}"))
            c = problem.bench_builder(rng, size)
            c.grad = False
            state = problem.weights(c, rng)
            if on_step:
                on_step(i, len(sizes), f"{spec.id} size {size}: your kernel")
            header, msg = problem.message(c, state, to_low)
            header.update(op="bench", dtype=dtype, device=device, warmup=warmup, reps=reps)
            worker.send(msg, header)
            notes = protocol.Notes()
            try:
                reply, _ = worker.receive(max(60.0, 20 * (grader.limits.time_limit or spec.grading.time_limit)),
                                          protocol.Budget(header=1 << 20), notes)
                error = verdict.clean_error(reply["error"]) if "error" in reply else None
                if error is None:
                    seconds, peak = verdict.number(reply.get("seconds"), "time"), verdict.number(reply.get("peak_bytes"), "size")
            except protocol.Timeout:
                raise UsageError(f"your kernel took too long at size {size}; try smaller --sizes") from None
            except (protocol.PeerClosed, protocol.ProtocolError) as e:
                raise UsageError(f"your kernel's process ended or sent back a malformed result at size {size} ({e})") from None
            if error or notes.forbidden or notes.tamper:
                raise UsageError(f"your kernel failed at size {size}: {error['message'] if error else 'a forbidden call'}")
            prog = problem.program(c, state, to_low)
            if on_step:
                on_step(i, len(sizes), f"{spec.id} size {size}: reference")
            ref = execute.bench(problem.reference, spec.entry.is_module, prog, dtype=low, device=device,
                                warmup=warmup, reps=reps, guard=guards.Guard([]))
            row = BenchRow(size, float(seconds), ref["seconds"], int(peak), ref["peak_bytes"])
            if problem.baseline is not None and not spec.entry.is_module:
                base = execute.bench(problem.baseline, False, prog, dtype=low, device=device,
                                     warmup=warmup, reps=reps, guard=guards.Guard([]))
                row.baseline_s, row.baseline_peak = base["seconds"], base["peak_bytes"]
            report.rows.append(row)
    if on_step:
        on_step(len(sizes), len(sizes), "done")
    return report

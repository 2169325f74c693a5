"""`bench`: time a correct learner kernel against the reference and a fused PyTorch baseline.

Only kernels that pass grading are benchmarked. The learner's kernel runs in the sandboxed
worker (it only ever runs there), the reference in a worker of its own (unconfined: it is
trusted), the baseline here. Nothing a worker says is taken as a time: this side

- times each exchange with a worker (request sent, reply read) with its own clock: on the CPU
  the worker's CPU time from the kernel's accounting (/proc), on a GPU wall-clock time; and
  takes off the least cost of the same exchange measured before anything was loaded into
  that worker (the grader's own code, making outputs of the right shapes without computing);
- sends every call new inputs of the same shapes, drawn from a secret seed, so no output can be
  cached or prepared ahead, and compares the outputs of the memory pass and of every timed call
  with the reference's on the same inputs exactly as grading does: a wrong or missing output is
  a failure, never a row.

Each size gets warm-up calls, one memory pass (largest allocation on CPU, max_memory_allocated
on CUDA: each worker's own figure, which the learner's code could forge) and the median of
``reps`` timed calls, each call going to the learner's worker and then to the reference's.
"""

from __future__ import annotations

import math
import os
import secrets
import select
import socket
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from torchcode.catalog.spec import ProblemSpec
from torchcode.errors import GraderError, UsageError
from torchcode.grader import cases as caseapi
from torchcode.grader import execute, guards, protocol, verdict
from torchcode.grader.problem import Prepared
from torchcode.grader.result import Verdict


@dataclass
class BenchRow:
    size: int
    learner_s: float
    reference_s: float
    learner_peak: int
    reference_peak: int
    baseline_s: float | None = None
    baseline_peak: int | None = None
    overhead_s: float = 0.0  # taken off learner_s: the least an exchange cost without your kernel (before it was loaded)
    learner_wall_s: float = 0.0  # median wall-clock time of an exchange with the worker, overhead included

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
    clock: str = "wall"  # "cpu": CPU time from the kernel's accounting (on the CPU); "wall": wall-clock time

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
              warmup: int = 2, reps: int = 5, seed: int | None = None, on_step=None) -> BenchReport:
    problem = grader.problem(spec)
    if problem.bench_builder is None:
        raise UsageError(f"{spec.id} has no benchmark (its cases.py defines no @benchmark builder)")
    device = grader.limits.device
    sizes = bench_sizes(spec, device, sizes)
    if not sizes:
        raise UsageError(f"{spec.id} declares no benchmark sizes for {device} ([bench] {device} = [...] in problem.toml)")
    warmup, reps = max(warmup, 1), max(reps, 1)
    seed = secrets.randbits(62) if seed is None else seed  # unknown to the worker: no output can be made ahead
    # on the CPU, with one thread on each side, CPU time: what other programs on the machine do barely changes it
    clock = "cpu" if device == "cpu" and grader.limits.threads == 1 and _cpu_seconds(os.getpid()) is not None else "wall"
    report = BenchReport(spec.id, str(path), device, dtype, reps, clock=clock)
    from torchcode.grader.judge import threads

    timeout = max(60.0, 20 * (grader.limits.time_limit or spec.grading.time_limit))
    with threads(grader.limits.threads):
        plans = [_Size(problem, size, seed, dtype, device, warmup, reps, clock) for size in sizes]

        def calibrate(side: str):
            def measure(worker) -> None:  # nothing loaded in the worker yet: only the grader's code runs there
                for plan in plans:
                    plan.calibrate(worker, side, timeout)
            return measure

        # The reference runs in a worker of its own, timed exactly as yours (same process state, same clock),
        # and first: nothing of yours is loaded anywhere while it and the fused kernel are timed, so nothing of
        # yours can slow them down (work left running on the machine or on the GPU).
        with grader.loaded_worker(spec, path, dtype, before_load=calibrate(REF), reference=True) as ref:
            for i, plan in enumerate(plans):
                if on_step:
                    on_step(i, 2 * len(sizes), f"{spec.id} size {plan.size}: reference")
                plan.run_reference(ref, timeout)
        with grader.loaded_worker(spec, path, dtype, before_load=calibrate(MINE)) as mine:
            for i, plan in enumerate(plans):
                if on_step:
                    on_step(len(sizes) + i, 2 * len(sizes), f"{spec.id} size {plan.size}: your kernel")
                report.rows.append(plan.run(mine, timeout))
    if on_step:
        on_step(2 * len(sizes), 2 * len(sizes), "done")
    return report


MINE, REF = "your kernel", "the reference"


class _Size:
    """One benchmark size: its calls (each with its own inputs, same shapes), in the order they run:
    ``warmup`` untimed, one memory pass, ``reps`` timed."""

    def __init__(self, problem, size: int, seed: int, dtype: str, device: str, warmup: int, reps: int, clock: str):
        self.problem, self.spec, self.size, self.dtype, self.device = problem, problem.spec, size, dtype, device
        self.cpu_clock = clock == "cpu"
        self.low = protocol.DTYPES[dtype]
        self.warmup, self.reps = warmup, reps
        self.memory_pass = warmup  # index of the memory pass; the timed calls follow it
        self.cases = []
        for k in range(warmup + 1 + reps):
            c = problem.bench_builder(caseapi.Rng(caseapi.case_seed(seed, f"bench/{size}/{k}")), size)
            c.grad = False
            if self.cases and caseapi.structure(c) != caseapi.structure(self.cases[0]):
                raise UsageError(f"{self.spec.id}'s @benchmark builder makes calls of different shapes at size {size} "
                                 "for different random inputs; bench needs the same shapes for every call")
            self.cases.append(c)
        self.state = problem.weights(self.cases[0], caseapi.Rng(caseapi.case_seed(seed, f"bench/{size}/weights")))
        target = execute.bench_target(problem.reference, self.spec.entry.is_module,
                                      problem.program(self.cases[0], self.state, self._cast), dtype=self.low, device=device)
        out, _ = execute.bench_call(target, *self._args(0), device=device)
        self.like = _like(out)  # the outputs' shapes, for the overhead exchanges
        leaves = [t for t in execute.flatten(out).values() if isinstance(t, torch.Tensor)]
        nbytes = sum(t.numel() * t.element_size() for t in leaves)
        # the reply may hold what a correct kernel returns, with room for a wrong dtype or shape to be reported as one
        self.budget = protocol.Budget(header=1 << 20, tensors=len(leaves) + 8, nbytes=4 * nbytes + (1 << 20))
        del target, out, leaves
        if device.startswith("cuda"):
            torch.cuda.empty_cache()  # the device's memory is the workers' now
        self.overhead: dict[str, float] = {}

    def _cast(self, t: torch.Tensor) -> torch.Tensor:
        return t.to(self.low) if t.is_floating_point() else t

    def _args(self, k: int) -> tuple[tuple, dict]:
        return execute.bench_args(self.problem.program(self.cases[k], {}, self._cast), self.device)

    def _message(self, k: int, op: str, **extra) -> tuple[dict, protocol.Message]:
        header, msg = self.problem.message(self.cases[k], {}, self._cast)
        header.update(op=op, dtype=self.dtype, device=self.device, **extra)
        return header, msg

    def _exchange(self, worker, header: dict, msg: protocol.Message, timeout: float, side: str):
        """Send one request and read its reply, timed here: (reply, tensors, notes, seconds of the clock, wall seconds).

        The CPU clock is the worker's CPU time, read from the kernel's accounting (/proc) before and after."""
        notes = protocol.Notes()
        cpu0 = _cpu_seconds(worker.pid) if self.cpu_clock else None
        start = time.perf_counter()
        try:
            if not _send_alone(worker.sock, msg.frames(header), timeout):
                if side == REF:
                    raise GraderError(f"the reference's worker sent something it was not asked for at size {self.size}")
                raise UsageError(f"your kernel's process sent the grader a message it had not asked for at size "
                                 f"{self.size} (a reply before the call's inputs were sent): did your code write to the "
                                 "grader's socket? Only what comes back after a call's inputs counts.")
            reply, tensors = worker.receive(timeout, self.budget, notes)
        except protocol.Timeout:
            if side == REF:
                raise GraderError(f"the reference took more than {timeout:g} s at size {self.size}") from None
            raise UsageError(f"your kernel took too long at size {self.size}; try smaller --sizes") from None
        except (protocol.PeerClosed, protocol.ProtocolError, OSError) as e:
            if worker.memory_over:  # stopped by the grader's memory watch (a GPU: no address-space limit)
                who = "the reference" if side == REF else "your kernel"
                raise (GraderError if side == REF else UsageError)(
                    f"{who} took {worker.memory_over} more host memory at size {self.size}, past the memory limit "
                    "(--memory-limit): try smaller --sizes or a larger --memory-limit") from None
            if side == REF:
                raise GraderError(f"the reference's worker ended or sent back a malformed result at size {self.size} "
                                  f"({e})") from None
            raise UsageError(f"your kernel's process ended or sent back a malformed result at size {self.size} ({e})"
                             ) from None
        wall = time.perf_counter() - start
        if not self.cpu_clock:
            return reply, tensors, notes, wall, wall
        cpu1 = _cpu_seconds(worker.pid)
        if cpu0 is None or cpu1 is None:
            raise GraderError(f"cannot read the CPU time of the worker process {worker.pid} from /proc")
        return reply, tensors, notes, cpu1 - cpu0, wall

    def calibrate(self, worker, side: str, timeout: float) -> None:
        """The cost of an exchange without a kernel: the worker's own code (nothing is loaded yet) receives
        each call's inputs, moves them to the device and sends back zeros of the outputs' shapes."""
        costs = []
        for k in self.order():
            header, msg = self._message(k, "bench_echo", like=self.like)
            try:
                reply, _, _, seconds, _ = self._exchange(worker, header, msg, timeout, side)
            except UsageError as e:
                raise GraderError(f"the worker could not measure the grader's own overhead ({e})") from None
            if "outputs" not in reply:
                raise GraderError(f"the worker could not measure the grader's own overhead: {str(reply.get('error'))[:300]}")
            if k > self.memory_pass:
                costs.append(seconds)
        self.overhead[side] = min(costs)  # the least: noise in this measurement can only count against the kernel

    def order(self) -> list[int]:
        return list(range(len(self.cases)))

    def _calls(self, worker, side: str, timeout: float):
        """Set the worker up, then make every call in turn: yields (call, reply, tensors, notes, seconds, wall)
        for each call that sent back outputs; the first one that did not is a failure."""
        header, msg = self.problem.message(self.cases[0], self.state, self._cast)
        header.update(op="bench_setup", steps=[], dtype=self.dtype, device=self.device)
        reply, _, notes, _, _ = self._exchange(worker, header, msg, timeout, side)
        if "ok" not in reply or notes.forbidden or notes.tamper:
            self._fail(side, -1, reply, notes)
        for k in self.order():
            header, msg = self._message(k, "bench_call", memory=k == self.memory_pass)
            reply, tensors, notes, seconds, wall = self._exchange(worker, header, msg, timeout, side)
            if "outputs" not in reply or notes.forbidden or notes.tamper:
                self._fail(side, k, reply, notes)  # an error: say so now
            yield k, reply, tensors, notes, seconds, wall

    def _peak(self, side: str, k: int, reply: dict, notes) -> int:
        try:
            return int(verdict.number(reply.get("peak_bytes"), "size"))
        except protocol.ProtocolError:
            self._fail(side, k, {}, notes)

    def run_reference(self, worker, timeout: float) -> None:
        """The reference's outputs, peak and time on every call; the fused kernel's time here."""
        self.ref_outs, times = {}, []
        for k, reply, tensors, notes, seconds, _ in self._calls(worker, REF, timeout):
            self.ref_outs[k] = _outputs(reply, tensors, self.size)
            if k == self.memory_pass:
                self.ref_peak = self._peak(REF, k, reply, notes)
            elif k > self.memory_pass:
                times.append(seconds)
        self.ref_s = max(statistics.median(times) - self.overhead[REF], 0.0)
        self.baseline = None
        if self.problem.baseline is not None and not self.spec.entry.is_module:
            self.baseline = self._time_here(self.problem.baseline)

    def run(self, worker, timeout: float) -> BenchRow:
        """Your kernel on the same calls, every output measured compared with the reference's as grading does
        (a warm-up call's output counts for nothing: it is only required to be there)."""
        times, walls, peak = [], [], 0
        for k, reply, tensors, notes, seconds, wall in self._calls(worker, MINE, timeout):
            if k >= self.memory_pass:
                self._check(k, reply, tensors, notes, self.ref_outs[k])
            if k == self.memory_pass:
                peak = self._peak(MINE, k, reply, notes)
            elif k > self.memory_pass:
                times.append(seconds)
                walls.append(wall)
        self.ref_outs = {}
        row = BenchRow(self.size, max(statistics.median(times) - self.overhead[MINE], 0.0), self.ref_s, peak,
                       self.ref_peak, overhead_s=self.overhead[MINE], learner_wall_s=statistics.median(walls))
        if self.baseline is not None:
            row.baseline_s, row.baseline_peak = self.baseline
        return row

    def _time_here(self, target) -> tuple[float, int]:
        """Time ``target`` in this process on the same calls: (median seconds, peak bytes). The CPU clock is
        this thread's CPU time (the grader computes on one thread, as the workers do)."""
        clock = time.thread_time if self.cpu_clock else time.perf_counter
        times, peak = [], 0
        for k in self.order():
            args, kwargs = self._args(k)
            if k == self.memory_pass:
                _, peak = execute.bench_call(target, args, kwargs, device=self.device, guard=guards.Guard([]))
            else:
                start = clock()
                execute.bench_call(target, args, kwargs, device=self.device)
                if k > self.memory_pass:
                    times.append(clock() - start)
        return statistics.median(times), int(peak)

    def _check(self, k: int, reply: dict, tensors: list, notes, ref_out) -> None:
        c = self.cases[k]
        to64 = lambda t: t.to(self.low).double() if t.is_floating_point() else t  # noqa: E731
        gold = execute.run(self.problem.reference, self.spec.entry.is_module, self.problem.program(c, self.state, to64),
                           execute.Stage(), dtype=torch.float64, device=self.device)  # a GPU's sizes: minutes on a CPU
        p = Prepared(c, {"device": self.device}, protocol.Message(), execute.Execution(outputs=[_cpu(gold.outputs[0])]),
                     execute.Execution(outputs=[ref_out]), [],
                     {(i, path): m for i, s in enumerate(c.steps) for path, m in s.ignore.items()},
                     tuple(self.spec.entry.params))
        res = self.problem.judge(p, _as_case_reply(reply), tensors, notes)
        if res.verdict is not Verdict.ACCEPTED:
            self._fail(MINE, k, reply, notes, res.message)

    def _fail(self, side: str, k: int, reply: dict, notes, message: str | None = None):
        if message is None:
            if notes.forbidden or notes.tamper:
                message = ("your code tampered with the grader's guards" if notes.tamper
                           else f"called {', '.join(notes.forbidden)}")
            elif "error" in reply:
                try:
                    message = verdict.clean_error(reply["error"])["message"]
                except protocol.ProtocolError as e:
                    message = verdict.malformed(e)
            else:
                message = verdict.malformed(protocol.ProtocolError("no outputs" if k != self.memory_pass else "bad size"))
        which = ("being set up" if k < 0 else "a warm-up call" if k < self.memory_pass
                 else "the memory pass" if k == self.memory_pass else f"timed call {k - self.memory_pass}")
        message = message.strip()
        if side == REF:
            raise GraderError(f"the reference failed at size {self.size} ({which}): {message}")
        raise UsageError(f"your kernel failed at size {self.size} ({which}): {message}"
                         + ("" if message.endswith((".", "?", "!")) else ".")
                         + " Only correct results are timed: every call gets new inputs, and its outputs are compared "
                           "with the reference's as grading does.")


def _as_case_reply(reply: dict) -> dict:
    """A bench reply in the shape grading judges (only its outputs come from the worker)."""
    return {"seconds": 0.0, "largest": 0, "largest_shape": [], "widest": [0, "", []], "outputs": reply.get("outputs"),
            "input_grads": {}, "param_grads": {}}


def _like(out):
    """The shapes of a call's outputs, for the worker's overhead exchange: [shape], {"L": [...]} or None."""
    if isinstance(out, torch.Tensor):
        return list(out.shape)
    if isinstance(out, (tuple, list)):
        return {"L": [_like(x) for x in out]}
    return None


def _send_alone(sock, frames: list[bytes], timeout: float) -> bool:
    """Send a request, watching the socket: False (nothing more is sent) as soon as the worker sends anything
    before the whole request is out, which no honest worker does (it reads a request, then answers it)."""
    deadline = time.monotonic() + timeout
    poller = select.poll()
    poller.register(sock, select.POLLIN | select.POLLOUT)
    sock.setblocking(False)
    try:
        for frame in frames:
            view = memoryview(frame)
            while view:
                events = 0
                for _, ev in poller.poll(max(deadline - time.monotonic(), 0) * 1000):
                    events |= ev
                if events & (select.POLLIN | select.POLLHUP | select.POLLERR):
                    if not sock.recv(1, socket.MSG_PEEK):
                        raise protocol.PeerClosed("the worker closed the connection")
                    return False
                if not events & select.POLLOUT:
                    raise protocol.ProtocolError("it stopped reading the grader's requests")
                try:
                    view = view[sock.send(view):]
                except BlockingIOError:
                    continue
    finally:
        sock.settimeout(timeout)
    return True


def _outputs(reply: dict, tensors: list, size: int):
    """The reference's returned value, rebuilt from its worker's reply."""
    def value(v):
        if v is None:
            return None
        if isinstance(v, dict) and type(v.get("T")) is int and 0 <= v["T"] < len(tensors):
            return tensors[v["T"]]
        if isinstance(v, dict) and isinstance(v.get("L"), list):
            return tuple(value(x) for x in v["L"])
        raise GraderError(f"the reference returned something bench cannot compare at size {size}: {str(v)[:100]}")

    outputs = reply.get("outputs")
    if not isinstance(outputs, list) or len(outputs) != 1:
        raise GraderError(f"the reference's worker sent back no result at size {size}")
    return value(outputs[0])


def _cpu(v):
    if isinstance(v, torch.Tensor):
        return v.detach().cpu()
    if isinstance(v, (tuple, list)):
        return tuple(_cpu(x) for x in v)
    return v


def _cpu_seconds(pid: int) -> float | None:
    """CPU time the kernel has charged to a process's threads (/proc/PID/task/*/schedstat, in ns), or None.
    A thread that ends between the listing and the read is skipped (its time is no longer the process's to
    count): under load that race made bench fall back to the wall clock now and then."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    total, read = 0, 0
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
            read += 1
        except (FileNotFoundError, ProcessLookupError):
            continue  # the thread ended
        except (OSError, ValueError, IndexError):
            return None  # no schedstat on this kernel
    return total / 1e9 if read else None

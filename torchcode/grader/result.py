"""What grading returns: plain dataclasses, no torch, no display code.

Rendering lives in ``torchcode.render``; ``Report.to_dict()`` is the ``--json`` schema.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from enum import Enum


class Verdict(str, Enum):
    ACCEPTED = "accepted"
    WRONG_ANSWER = "wrong_answer"  # values, gradients or a property of the variant are wrong
    WRONG_OUTPUT = "wrong_output"  # shape, dtype, type
    WRONG_DEVICE = "wrong_device"  # an output, or a tensor the code made, on another device than the inputs
    NOT_IMPLEMENTED = "not_implemented"  # the stub still raises NotImplementedError
    SYNTAX_ERROR = "syntax_error"
    BAD_INTERFACE = "bad_interface"  # entry point missing, wrong signature, wrong parameters
    RUNTIME_ERROR = "runtime_error"
    FORBIDDEN_CALL = "forbidden_call"
    TOO_MUCH_MEMORY = "too_much_memory"  # an intermediate as large as the full score matrix
    WRONG_ALGORITHM = "wrong_algorithm"  # work that grows too fast with S, or a reduction the algorithm must avoid
    TIME_LIMIT = "time_limit"
    MEMORY_LIMIT = "memory_limit"  # the worker's address-space limit was hit
    CRASHED = "crashed"  # the process died (signal, os._exit, out of memory)
    NOT_RUN = "not_run"  # an earlier case killed the worker

    @property
    def passed(self) -> bool:
        return self is Verdict.ACCEPTED


# How a case that passed, then failed when run again with new values of the same shapes, is reported when it fails
# in a fresh process too: the values, not state, make it fail (judge.Grader._replay_failed).
FAILS_WITH_NEW_VALUES = "run again with new values of the same shapes, "
# The words of the message for a NaN or inf where the reference is finite: specific in form (no values mismatch) but
# generic in advice (it lists the usual causes), so a case with advice of its own is explained before it
NOT_FINITE = "where the expected value is finite"

# Which verdict explains a failed check best, when cases disagree: earlier is stronger.
SEVERITY = [
    Verdict.SYNTAX_ERROR, Verdict.BAD_INTERFACE, Verdict.NOT_IMPLEMENTED, Verdict.FORBIDDEN_CALL,
    Verdict.CRASHED, Verdict.TIME_LIMIT, Verdict.MEMORY_LIMIT, Verdict.WRONG_DEVICE, Verdict.RUNTIME_ERROR,
    Verdict.TOO_MUCH_MEMORY, Verdict.WRONG_ALGORITHM, Verdict.WRONG_OUTPUT, Verdict.WRONG_ANSWER, Verdict.NOT_RUN, Verdict.ACCEPTED,
]


@dataclass
class Mismatch:
    """Where a learner tensor differs from the expected one most."""

    what: str  # "output", "output[1][0]", "gradient of Q", "gradient of W_q.weight"
    shape: list[int]
    max_abs_err: float
    max_rel_err: float
    index: list[int]  # where the absolute error is largest
    expected: float
    got: float
    allowed: float  # the tolerance it had to meet
    bad: int  # elements over the tolerance
    total: int
    bias: float | None = None  # low precision: the systematic relative error of a tensor whose elements each pass
    bias_dim: int | None = None  # where the lean is per slice along a dimension (rms over the slices): that dimension
    bias_block: list[int] | None = None  # where it is per block of the halves of two dimensions: those dimensions
    detail: str = ""  # where the wrong elements lie, when that narrows it down (slices swapped, only some rows wrong)


def plain_mismatch(m: Mismatch) -> str:
    """The first sentence of a values mismatch's message (a terminal shows its numbers as a table instead)."""
    return (f"{m.what} does not match the reference: {m.bad:,} of {m.total:,} elements are off, "
            f"worst at index {m.index} (expected {m.expected:.6g}, got {m.got:.6g})")


@dataclass
class CaseResult:
    name: str
    verdict: Verdict
    targets: str = ""  # what the case is about, in the learner's terms
    message: str = ""  # one or two sentences: what is wrong and what to fix
    mismatch: Mismatch | None = None
    traceback: str = ""  # the learner's frames only
    seconds: float = 0.0
    replay: bool = False  # the failure came from running the case again with new values of the same shapes

    @property
    def passed(self) -> bool:
        return self.verdict.passed


@dataclass
class Report:
    problem: str
    file: str
    verdict: Verdict
    seed: int
    message: str = ""
    cases: list[CaseResult] = field(default_factory=list)
    seconds: float = 0.0  # wall time of the whole check
    load_seconds: float = 0.0  # importing the learner's file in the worker
    output: str = ""  # what the learner's code printed (truncated)
    traceback: str = ""  # when the file could not even be imported: the learner's frames, or the caret
    sha256: str = ""
    limits: dict = field(default_factory=dict)
    device: str = "cpu"
    dtypes: list[str] = field(default_factory=lambda: ["float32"])
    advice: list[str] = field(default_factory=list)  # for accepted code: what would still break elsewhere (a GPU)

    @property
    def passed(self) -> bool:
        return self.verdict.passed

    @property
    def cases_passed(self) -> int:
        return sum(c.passed for c in self.cases)

    @property
    def first_failure(self) -> CaseResult | None:
        return next((c for c in self.cases if not c.passed and c.verdict is not Verdict.NOT_RUN), None)

    @property
    def failing_like_explained(self) -> list[CaseResult]:
        """The failing cases with the check's verdict (the kind of failure the report explains)."""
        return [c for c in self.cases if not c.passed and c.verdict is self.verdict]

    @property
    def explained(self) -> CaseResult | None:
        """The failing case that best names the bug, the one the report explains in detail.

        A case failing alone names it. Otherwise a case whose message is specific advice (a property
        the case checks, an input changed in place, state kept between calls) rather than a plain
        mismatch. (A case whose first values happened to pass and whose new values fail in a fresh
        process too is a plain mismatch: the values showed the bug, not state; a NaN where the reference is finite
        is specific too, after every other.) When (nearly) every
        case fails, the mistake is one they all share, not the feature one case is about: the
        smallest case shows it most plainly. Else the first, in definition order (authors put the case
        about the central idea first), that failed on its first values."""
        bad = self.failing_like_explained
        if len(bad) <= 1:
            return bad[0] if bad else self.first_failure
        specific = [c for c in bad if c.replay and not c.message.startswith(FAILS_WITH_NEW_VALUES)  # state, proven
                    or c.verdict is Verdict.WRONG_ANSWER and c.mismatch is None]
        targeted = [c for c in specific if NOT_FINITE not in c.message]
        if targeted or specific:
            return (targeted or specific)[0]
        ran = [c for c in self.cases if c.verdict is not Verdict.NOT_RUN]
        if len(ran) >= 3 and len(bad) >= len(ran) - 1 and all(c.mismatch for c in bad):
            return min(bad, key=lambda c: (c.replay, c.mismatch.total))  # one that failed on its first values
        return next((c for c in bad if not c.replay), bad[0])  # failed on its first values: shows the bug plainest

    def to_dict(self) -> dict:
        d = asdict(self)
        d["verdict"] = self.verdict.value
        d["passed"] = self.passed
        d["cases_passed"] = self.cases_passed
        d["cases_total"] = len(self.cases)
        explained = self.explained if not self.passed else None
        d["explained"] = explained.name if explained else ""  # the case the report explains in detail
        for c in d["cases"]:
            c["verdict"] = c["verdict"].value if isinstance(c["verdict"], Verdict) else c["verdict"]
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "Report":
        """The inverse of ``to_dict`` (the warm session sends reports across a process boundary)."""
        names = {f.name for f in fields(cls)}
        kept = {k: v for k, v in d.items() if k in names}
        kept["verdict"] = Verdict(d["verdict"])
        kept["cases"] = [_case(c) for c in d.get("cases", [])]
        return cls(**kept)


def _case(d: dict) -> CaseResult:
    kept = {k: v for k, v in d.items() if k in {f.name for f in fields(CaseResult)}}
    kept["verdict"] = Verdict(d["verdict"])
    if kept.get("mismatch") is not None:
        kept["mismatch"] = Mismatch(**kept["mismatch"])
    return CaseResult(**kept)


def overall(cases: list[CaseResult]) -> Verdict:
    failed = [c.verdict for c in cases if not c.passed]
    if not failed:
        return Verdict.ACCEPTED
    # a NotImplementedError left for one input form (5-D inputs, a cache) is the verdict only when nothing else
    # failed: wrong answers, a forbidden call or a crash elsewhere are not "unfinished"
    done = [v for v in failed if v not in (Verdict.NOT_IMPLEMENTED, Verdict.NOT_RUN)]
    return min(done or failed, key=SEVERITY.index)

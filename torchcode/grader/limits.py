"""Resource limits of a check (plain data, no torch)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field


@dataclass
class Limits:
    time_limit: float | None = None  # seconds per case; None: the problem's own
    load_limit: float = 30.0  # seconds to import the learner's file
    memory_mb: int = 6144  # beyond what the worker holds at start: address space on the CPU, host memory on CUDA
    output_bytes: int = 8 << 20  # what the learner's code may print
    threads: int = 1
    total_limit: float = 120.0  # seconds for the whole check
    confine: bool = True  # seccomp (no new processes) and Landlock (no access to the grader's files)
    device: str = "cpu"  # "cpu" or "cuda" (the worker initialises CUDA itself, before its confinement)
    # "module:function" replacing the worker's device initialiser (tests simulate a device with it)
    device_init: str | None = field(default_factory=lambda: os.environ.get("TORCHCODE_DEVICE_INIT") or None)
    # more paths a submission may not read (grade: the class's other submissions, the gradebook, the feedback)
    protect: list[str] = field(default_factory=list)
    # folders a submission graded from a text may import its own modules from (Jupyter: the notebook's)
    imports_from: list[str] = field(default_factory=list)

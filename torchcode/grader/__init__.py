"""The grader: run a submission in a sandboxed worker, compare against the reference, decide.

Layout:
  result.py    verdicts and reports (plain data, no torch)
  cases.py     the author API for hidden cases
  sandbox.py   zygote + worker processes, limits, reaping
  startup.py   how a worker gets ready: limits, device, then confinement (before any learner code)
  worker.py    the sandboxed side: load the learner's file, run calls under guards
  guards.py    forbidden calls, escape hatches, largest intermediate
  execute.py   one case program run on an entry point (shared by both sides)
  protocol.py  the no-pickle wire format
  compare.py   dtype-aware tolerances
  judge.py     the trusted side: prepares cases, runs the reference, decides

Importing ``torchcode.grader.result`` is free; everything else imports torch.
"""

from __future__ import annotations


def __getattr__(name):
    if name in ("Grader", "Limits", "grade_file", "Problem"):
        from torchcode.grader import judge

        return getattr(judge, name)
    raise AttributeError(name)

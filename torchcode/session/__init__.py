"""A warm grading session: the engine behind `watch`, Jupyter, `serve` and `grade`.

    from torchcode.session import Session

    with Session() as s:                       # starts the session's process: torch imported once
        report = s.grade("gqa", path="gqa.py")  # a fresh confined worker per submission
        report = s.grade("gqa", source=text, on_event=print)

The grading runs in a separate process (``torchcode.session.server``), never in the caller's:
the caller does not import torch, is never forked, and nothing a submission does reaches it.
Importing this module is cheap.
"""

from __future__ import annotations

from torchcode.session.client import Cancelled, Session

__all__ = ["Session", "Cancelled"]

"""Terminal rendering with rich. Only the CLI layer calls this; the core returns plain data."""

from __future__ import annotations

from rich.console import Console

VERDICT_STYLE = {
    "accepted": ("bold green", "Accepted"),
    "wrong_answer": ("bold red", "Wrong answer"),
    "wrong_output": ("bold red", "Wrong output shape/type"),
    "wrong_device": ("bold red", "Wrong device"),
    "not_implemented": ("bold yellow", "Not implemented yet"),
    "syntax_error": ("bold red", "Syntax error"),
    "bad_interface": ("bold red", "Wrong interface"),
    "runtime_error": ("bold red", "Runtime error"),
    "forbidden_call": ("bold magenta", "Forbidden call"),
    "too_much_memory": ("bold magenta", "Too much memory"),
    "wrong_algorithm": ("bold magenta", "Wrong algorithm"),
    "time_limit": ("bold yellow", "Time limit exceeded"),
    "memory_limit": ("bold yellow", "Memory limit exceeded"),
    "crashed": ("bold red", "Crashed"),
    "not_run": ("dim", "Not run"),
}
STATUS_STYLE = {"solved": "green", "attempted": "yellow", "todo": "dim"}


def console() -> Console:
    return Console(highlight=False, soft_wrap=False)


def err_console() -> Console:
    return Console(stderr=True, highlight=False, soft_wrap=True)


def verdict_label(verdict: str) -> tuple[str, str]:
    return VERDICT_STYLE.get(verdict, ("bold", verdict))


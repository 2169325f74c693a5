"""Rendering of a bench report: times, ratios, peak memory and how both grow with the size."""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table


def _bytes(n: int | None) -> str:
    if n is None:
        return "-"
    for unit in ("B", "K", "M", "G"):
        if n < 1024 or unit == "G":
            return f"{n:.0f}{unit}" if n >= 10 or unit == "B" else f"{n:.1f}{unit}"
        n /= 1024
    return str(n)


def _ms(s: float | None) -> str:
    return "-" if s is None else f"{s * 1000:.2f}"


def _k(x: float | None) -> str:
    return "" if x is None else f"{x:.1f}"


def table(con: Console, r, file: str) -> None:
    t = Table(title=f"bench {r.problem}  {file}  ({r.device}, {r.dtype}, ms{' of CPU time' if r.clock == 'cpu' else ''}: median of {r.reps})",
              header_style="bold", box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1))
    for col in ("size", "yours", "ref", "x ref", "fused", "peak", "mem k", "time k", "ref pk", "fused pk"):
        t.add_column(col, justify="right", no_wrap=True, min_width=len(col))
    peak_k, time_k = r.growth("learner_peak"), r.growth("learner_s")
    for row, pk, tk in zip(r.rows, peak_k, time_k):
        t.add_row(str(row.size), _ms(row.learner_s), _ms(row.reference_s), f"{row.ratio:.2f}x", _ms(row.baseline_s),
                  _bytes(row.learner_peak), _k(pk), _k(tk), _bytes(row.reference_peak), _bytes(row.baseline_peak))
    # never narrower than the figures: a pipe or a log gets 80 columns, where rich cropped "2.0M" to "2.0"
    need, width = Measurement.get(con, con.options.update(width=10_000), t).maximum, con.width
    con.width = max(width, need)  # print(width=) is capped at the console's own
    try:
        con.print(t)
    finally:
        con.width = width
    ref_k = r.growth("reference_peak")
    worse = [(k, rk) for k, rk in zip(peak_k, ref_k) if k is not None and rk is not None and k > rk + 0.5]
    if worse:
        k, rk = max(worse)
        con.print(f"[yellow]Your peak memory grows like size^{k:.1f} where the reference's grows like size^{rk:.1f}: "
                  "an intermediate the reference avoids is still there.[/yellow]")
    con.print("[dim]yours / ref / fused: your kernel, the reference, PyTorch's fused kernel (ms). Yours is timed "
              "from outside its process, on new inputs every call, every timed output checked; the grader's own cost of a "
              "call is taken off. peak: largest allocation (CPU) or max_memory_allocated (CUDA), as your kernel's "
              "process reports it. k: cost ~ size^k from the row above (2 = quadratic).[/dim]")

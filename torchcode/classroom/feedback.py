"""What a class run leaves in ``--out``: grades.csv, grades.json, one feedback file per student,
and the summary table an instructor reads at the end (pass rate per problem, the cases the class
failed most)."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from torchcode.classroom.gradebook import Row
from torchcode.render import verdict_label
from torchcode.render.terminal import inert, inert_name

FEEDBACK_MODES = ("full", "summary", "none")
MISSING = "missing"  # the student has no file for this problem
NOT_GRADED = "not_graded"  # a file, but no current result (interrupted, or the grader could not run)
COLUMNS = ["student", "problem", "verdict", "cases_passed", "cases_total", "score", "seconds", "sha256"]
BENCH_COLUMNS = ["ms", "x_ref", "rank"]


@dataclass
class Entry:
    """One (student, problem) cell of the grade sheet."""

    student: str
    problem: str
    row: Row | None = None
    sha256: str = ""
    note: str = ""  # why there is no result
    rank: int | None = None  # --bench: speed rank among the problem's accepted kernels

    @property
    def verdict(self) -> str:
        return self.row.verdict if self.row else (NOT_GRADED if self.sha256 or self.note else MISSING)

    def record(self, bench: bool) -> dict:
        r = self.row
        d = {"student": self.student, "problem": self.problem, "verdict": self.verdict,
             "cases_passed": r.passed if r else 0, "cases_total": r.total if r else "",
             # not graded (the grader failed, or the run was stopped) has no score: never a zero to post
             "score": r.score if r else (0.0 if self.verdict == MISSING else ""), "seconds": round(r.seconds, 3) if r else "",
             "sha256": r.sha256 if r else self.sha256}
        if bench:
            b = (r.bench if r else None) or {}
            d.update(ms=round(b["seconds"] * 1e3, 4) if "seconds" in b else "",
                     x_ref=round(b["ratio"], 3) if "ratio" in b else "", rank=self.rank or "")
        return d


def rank(entries: list[Entry]) -> None:
    """Number the accepted, benchmarked kernels of each problem from the fastest."""
    by_problem: dict[str, list[Entry]] = {}
    for e in entries:
        if e.row and e.row.bench and "ratio" in e.row.bench:
            by_problem.setdefault(e.problem, []).append(e)
    for group in by_problem.values():
        for n, e in enumerate(sorted(group, key=lambda e: e.row.bench["ratio"]), 1):
            e.rank = n


def write_all(out: Path, entries: list[Entry], *, seed: int, problems: list[str], unknown: list[str],
              feedback: str, bench: bool, status: str, packs: dict[str, str] | None = None) -> None:
    write_csv(out / "grades.csv", entries, bench)
    write_json(out / "grades.json", entries, seed=seed, problems=problems, unknown=unknown, status=status,
               feedback=feedback)
    if feedback != "none":
        write_feedback(out / "feedback", entries, seed=seed, mode=feedback, packs=packs)


def write_csv(path: Path, entries: list[Entry], bench: bool) -> None:
    tmp = path.with_suffix(".csv.tmp")
    with tmp.open("w", newline="", encoding="utf-8", errors="backslashreplace") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS + (BENCH_COLUMNS if bench else []))
        w.writeheader()
        for e in entries:
            w.writerow({k: _cell(v) for k, v in e.record(bench).items()})
    tmp.replace(path)


def _cell(value):
    """A folder name a spreadsheet would run as a formula (=, +, -, @) is written as text; control
    characters are written escaped (``cat grades.csv`` must not drive the terminal)."""
    if isinstance(value, str):
        value = inert(value)
        if value[:1] in ("=", "+", "-", "@", "\t", "\r"):
            return "'" + value
    return value


def write_json(path: Path, entries: list[Entry], *, seed: int, problems: list[str], unknown: list[str], status: str,
               feedback: str = "none") -> None:
    results = []
    for e in entries:
        d = e.record(bench=False)
        if e.row:
            d["cases"] = [{"name": c["name"], "verdict": c["verdict"]} for c in e.row.report.get("cases", [])]
            d["report"] = e.row.report
            if e.row.bench:
                d["bench"] = {**e.row.bench, "rank": e.rank}
        elif e.note:
            d["note"] = e.note
        results.append(d)
    doc = {"seed": seed, "status": status, "written": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "problems": problems,
           "students": sorted({e.student for e in entries}), "unknown_files": unknown, "results": results}
    if feedback != "none":  # who gets which file (a name that is no plain file name was cleaned, with a hash)
        students = list(dict.fromkeys(e.student for e in entries))
        doc["feedback_files"] = {s: f"feedback/{n}.txt" for s, n in file_names(students).items()}
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    tmp.replace(path)


class _Utf8(io.StringIO):
    encoding = "utf-8"  # so the report draws its Unicode marks


def write_feedback(folder: Path, entries: list[Entry], *, seed: int, mode: str, packs: dict[str, str] | None = None) -> None:
    """``packs``: problem -> the name of the pack folder it comes from (not the built-in course), for the line that
    tells the student how to reproduce a failure (without the pack, their check says "no problem named ...")."""
    from torchcode.grader.result import Report
    from torchcode.render.report import report as render

    folder.mkdir(parents=True, exist_ok=True)
    by_student: dict[str, list[Entry]] = {}
    for e in entries:
        by_student.setdefault(e.student, []).append(e)
    names = file_names(list(by_student))
    for student, mine in by_student.items():
        name = names[student]
        buf = _Utf8()
        con = Console(file=buf, width=100, color_system=None, force_terminal=False, highlight=False, soft_wrap=False)
        con.print(Text(f"Feedback for {inert_name(student)} (torchcode grade, seed {seed})"), soft_wrap=True)
        for e in mine:
            con.print(Text(f"\n== {e.problem} " + "=" * max(0, 90 - len(e.problem))))
            if e.row is None:
                con.print(Text(f"no {e.problem}.py was submitted" if e.verdict == MISSING else
                               f"{e.problem}.py was not graded" + (f": {e.note}" if e.note else "")))
            elif mode == "summary":
                label = verdict_label(e.row.verdict)[1]
                con.print(Text(f"{label}  {e.problem}  {e.row.passed}/{e.row.total} cases"))
                for said in e.row.report.get("advice") or []:  # grade --gpu-dry-run's, as check shows it
                    con.print(Text(inert(str(said))), soft_wrap=True)
            else:
                render(con, Report.from_dict(e.row.report), display_file=f"{e.problem}.py", every_case=True,
                       pack=(packs or {}).get(e.problem))
            b = e.row.bench if e.row else None
            if b and "ratio" in b:
                con.print(Text(f"speed: {b['ratio']:.2f}x the reference's time (geometric mean over sizes; "
                               f"{b['seconds'] * 1e3:.3g} ms at size {b['size']})"
                               + (f", rank {e.rank} in the class" if e.rank else "")), soft_wrap=True)
        # a folder name that is not UTF-8 (a lone surrogate once read) is written escaped, never a crash
        (folder / f"{name}.txt").write_text(buf.getvalue(), encoding="utf-8", errors="backslashreplace")


def file_names(students: list[str]) -> dict[str, str]:
    """Each student's feedback file name (without .txt), distinct even ignoring case and Unicode normalisation."""
    import unicodedata

    def key(name: str) -> str:  # one file on macOS or Windows: names differing in case or Unicode normalisation
        return unicodedata.normalize("NFC", name).casefold()

    names, used = {}, set()
    for student in students:
        name, n = _safe(student), 0
        while key(name) in used:  # a folder named like another's cleaned name, or differing only in case or form
            n += 1  # (a third one may be named like the second's: try again until the name is free)
            name = f"{_safe(student)}-{_digest(f'{student}#{n}' if n > 1 else student)[:16]}"
        used.add(key(name))
        names[student] = name
    return names


def _digest(name: str) -> str:
    return hashlib.sha256(name.encode("utf-8", "surrogateescape")).hexdigest()


NAME_BYTES = 120  # of a feedback file's name kept from the folder's: file systems stop at 255 (with hashes and .txt)


def _safe(name: str) -> str:
    """A file name for a student: their folder's name, or (when that needs changing: characters a file name should
    not hold, or longer than NAME_BYTES) a cleaned, shortened one with a short hash of the original, so two
    students never share a feedback file."""
    safe = "".join(c if c.isalnum() or c in "-_.@" else "_" for c in name).lstrip(".")
    short = safe.encode("utf-8", "surrogateescape")[:NAME_BYTES].decode("utf-8", "ignore")
    return safe if safe == name and short == safe else f"{short}-{_digest(name)[:8]}"


def summary(con: Console, entries: list[Entry], problems: list[str], *, most: int = 8, bench: bool = False) -> None:
    """Pass rate per problem, then the hidden cases the class failed most."""
    t = Table(title="Class summary", title_justify="left")
    for col, just in (("problem", "left"), ("submitted", "right"), ("accepted", "right"), ("pass rate", "right"),
                      ("mean score", "right"), ("most common failure", "left")):
        t.add_column(col, justify=just, no_wrap=just == "right", min_width=min(len(col), 10) if just == "right" else None)
    failed_cases: Counter = Counter()
    ran_cases: Counter = Counter()
    unrun = 0  # graded submissions none of whose cases ran (a file that could not load, a crash at import)
    targets: dict[tuple[str, str], str] = {}
    for p in problems:
        mine = [e for e in entries if e.problem == p]
        graded = [e for e in mine if e.row]
        submitted = [e for e in mine if e.verdict != MISSING]
        ok = sum(e.row.verdict == "accepted" for e in graded)
        fails = Counter(e.row.verdict for e in graded if e.row.verdict != "accepted")
        worst = fails.most_common(1)
        mean = sum(e.row.score for e in graded) / len(graded) if graded else 0.0
        t.add_row(p, str(len(submitted)), str(ok), f"{ok / len(graded):.0%}" if graded else "-", f"{mean:.2f}",
                  f"{verdict_label(worst[0][0])[1]} ({worst[0][1]})" if worst else "")
        for e in graded:
            unrun += all(c.get("verdict") == "not_run" for c in e.row.report.get("cases", []))
            for c in e.row.report.get("cases", []):
                if c["verdict"] == "not_run":
                    continue
                key = (p, c["name"])
                ran_cases[key] += 1
                targets[key] = c.get("targets", "")
                if c["verdict"] != "accepted":
                    failed_cases[key] += 1
    con.print(t)
    if failed_cases:
        f = Table(title="Cases the class failed most", title_justify="left",
                  caption="failed / ran: of the submissions that ran the case (one that could not load, or crashed "
                          "before its cases, counts in the table above only)" if unrun else None, caption_justify="left")
        for col, least in (("problem", 12), ("case", 14), ("failed/ran", 6), ("what it checks", 10)):
            f.add_column(col, justify="right" if col == "failed/ran" else "left", no_wrap=col == "failed/ran",
                         min_width=least)
        for (p, name), n in failed_cases.most_common(most):
            f.add_row(p, Text(name), f"{n}/{ran_cases[(p, name)]}", Text(inert(targets[(p, name)])))
        con.print(f)
    if bench:
        ranked = sorted((e for e in entries if e.rank), key=lambda e: (problems.index(e.problem), e.rank))
        if ranked:
            b = Table(title="Fastest accepted kernels (time / the reference's, geometric mean over sizes)",
                      title_justify="left")
            for col in ("problem", "rank", "student", "x ref", "ms at largest size"):
                b.add_column(col, justify="left" if col in ("problem", "student") else "right", no_wrap=True)
            for e in ranked:
                if e.rank <= 3:
                    bb = e.row.bench
                    b.add_row(e.problem, str(e.rank), Text(inert_name(e.student)), f"{bb['ratio']:.2f}x",
                              f"{bb['seconds'] * 1e3:.3g} (size {bb['size']})")
            con.print(b)
        failed = [e for e in entries if e.row and e.row.bench and "error" in e.row.bench]
        same: dict[tuple[str, str], list[str]] = {}  # one reason (a problem with no benchmark) said once
        for e in failed:
            same.setdefault((e.problem, e.row.bench["error"]), []).append(e.student)
        for (problem, why), students in same.items():
            con.print(f"not timed: {who(students, problem)}: {inert(why)}", highlight=False, markup=False)


def who(students: list[str], problem: str) -> str:
    """The submissions one message is about: ``ann/sdpa.py``, or ``3 submissions of sdpa (ann, ben, cat)``."""
    if len(students) == 1:
        return f"{inert_name(students[0])}/{problem}.py"
    return (f"{len(students)} submissions of {problem} ({', '.join(inert_name(s) for s in students[:3])}"
            f"{', ...' if len(students) > 3 else ''})")

"""The gradebook: every result of a class run, in ``--out/gradebook.sqlite3``.

One row per (student, problem): the file's sha256, the fingerprint of what it was graded
against (the problem's spec, cases and reference, the limits, the device and dtypes, the
torchcode version) and the run's seed. A rerun skips a row whose three keys are unchanged,
so an interrupted or extended run only grades what is new. Every result is committed in its
own transaction as soon as it arrives: Ctrl-C or a crash loses at most the grades in flight.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

import torchcode
from torchcode.errors import StoreError

NAME = "gradebook.sqlite3"
SCHEMA_VERSION = 1
SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY, started REAL NOT NULL, finished REAL, seed INTEGER NOT NULL,
    backend TEXT NOT NULL, workers INTEGER NOT NULL, graded INTEGER NOT NULL DEFAULT 0,
    skipped INTEGER NOT NULL DEFAULT 0, status TEXT NOT NULL DEFAULT 'running'
);
CREATE TABLE IF NOT EXISTS results (
    student TEXT NOT NULL, problem TEXT NOT NULL, sha256 TEXT NOT NULL, fingerprint TEXT NOT NULL,
    seed INTEGER NOT NULL, verdict TEXT NOT NULL, passed INTEGER NOT NULL, total INTEGER NOT NULL,
    score REAL NOT NULL, seconds REAL NOT NULL, report TEXT NOT NULL, graded_at REAL NOT NULL,
    run INTEGER NOT NULL, bench TEXT,
    PRIMARY KEY (student, problem)
);
"""


@dataclass
class Row:
    student: str
    problem: str
    sha256: str
    fingerprint: str
    seed: int
    verdict: str
    passed: int
    total: int
    score: float
    seconds: float
    report: dict  # Report.to_dict()
    bench: dict | None = None


def is_gradebook(path: Path) -> bool:
    """Whether ``path`` is a gradebook `torchcode grade` wrote (its tables and schema version), not merely a
    file of that name: opened read-only, never changed."""
    try:
        if not path.is_file() or path.is_symlink():
            return False
        with path.open("rb") as f:
            if f.read(16) != b"SQLite format 3\x00":
                return False
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=1)
        try:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            version = conn.execute("PRAGMA user_version").fetchone()[0]
        finally:
            conn.close()
    except (OSError, sqlite3.Error, ValueError):
        return False
    return {"meta", "runs", "results"} <= tables and version >= 1


def fingerprint(spec, settings: dict) -> str:
    """What a result depends on besides the submission and the seed."""
    h = hashlib.sha256(f"torchcode {torchcode.__version__}\n".encode())
    h.update(json.dumps(settings, sort_keys=True, default=str).encode())
    for f in (spec.folder / "problem.toml", spec.cases_path, spec.solution_path):
        h.update(f"\n{f.name}\n".encode())
        try:
            h.update(f.read_bytes())
        except OSError:
            h.update(b"<missing>")
    return h.hexdigest()


def score(passed: int, total: int, verdict: str) -> float:
    """1.0 when accepted, else the fraction of hidden cases passed."""
    if verdict == "accepted":
        return 1.0
    return round(passed / total, 4) if total else 0.0


class Gradebook:
    def __init__(self, out: Path):
        self.path = out / NAME
        try:
            out.mkdir(parents=True, exist_ok=True)
            self.conn = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
            self.conn.execute("PRAGMA busy_timeout = 30000")
            version = self.conn.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise StoreError(f"{self.path} was written by a newer torchcode (schema {version}); upgrade torchcode")
            if version < SCHEMA_VERSION:
                self.conn.execute("PRAGMA journal_mode = WAL")
                self.conn.executescript("BEGIN IMMEDIATE;" + SCHEMA + f"PRAGMA user_version = {SCHEMA_VERSION}; COMMIT;")
            self.conn.execute("PRAGMA synchronous = NORMAL")
            self.conn.execute("SELECT count(*) FROM results").fetchone()
        except OSError as e:
            raise StoreError(f"cannot create the output folder {out}: {e.strerror}") from None
        except sqlite3.DatabaseError as e:
            raise StoreError(f"cannot use the gradebook {self.path}: {e}. Move it aside or choose another --out.") from None

    def close(self) -> None:
        self.conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _write(self, sql: str, args: tuple) -> int:
        try:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                cur = self.conn.execute(sql, args)
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise
            self.conn.execute("COMMIT")
            return cur.lastrowid
        except sqlite3.DatabaseError as e:
            raise StoreError(f"cannot write the gradebook {self.path}: {e}") from None

    # -- the seed and runs -------------------------------------------------------------------
    def seed(self) -> int | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key = 'seed'").fetchone()
        return int(row[0]) if row else None

    def set_seed(self, seed: int) -> None:
        self._write("INSERT INTO meta (key, value) VALUES ('seed', ?) "
                    "ON CONFLICT(key) DO UPDATE SET value = excluded.value", (str(seed),))

    def start_run(self, seed: int, backend: str, workers: int, skipped: int) -> int:
        return self._write("INSERT INTO runs (started, seed, backend, workers, skipped) VALUES (?, ?, ?, ?, ?)",
                           (time.time(), seed, backend, workers, skipped))

    def finish_run(self, run: int, graded: int, status: str) -> None:
        self._write("UPDATE runs SET finished = ?, graded = ?, status = ? WHERE id = ?", (time.time(), graded, status, run))

    def runs(self) -> list[dict]:
        cols = ("id", "started", "finished", "seed", "backend", "workers", "graded", "skipped", "status")
        return [dict(zip(cols, r)) for r in self.conn.execute(f"SELECT {', '.join(cols)} FROM runs ORDER BY id")]

    # -- results -------------------------------------------------------------------------------
    def is_current(self, student: str, problem: str, sha256: str, fp: str, seed: int) -> bool:
        row = self.conn.execute("SELECT 1 FROM results WHERE student = ? AND problem = ? AND sha256 = ? "
                                "AND fingerprint = ? AND seed = ?", (student, problem, sha256, fp, seed)).fetchone()
        return row is not None

    def put(self, row: Row, run: int) -> None:
        self._write(
            "INSERT OR REPLACE INTO results (student, problem, sha256, fingerprint, seed, verdict, passed, total, score,"
            " seconds, report, graded_at, run, bench) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (row.student, row.problem, row.sha256, row.fingerprint, row.seed, row.verdict, row.passed, row.total,
             row.score, row.seconds, json.dumps(row.report), time.time(), run,
             json.dumps(row.bench) if row.bench is not None else None))

    def set_bench(self, student: str, problem: str, bench: dict) -> None:
        self._write("UPDATE results SET bench = ? WHERE student = ? AND problem = ?", (json.dumps(bench), student, problem))

    def rows(self) -> list[Row]:
        out = []
        for r in self.conn.execute("SELECT student, problem, sha256, fingerprint, seed, verdict, passed, total, score, "
                                   "seconds, report, bench FROM results ORDER BY student, problem"):
            out.append(Row(*r[:10], report=json.loads(r[10]), bench=json.loads(r[11]) if r[11] else None))
        return out

"""The progress store: every check, revealed hints and started files, in one SQLite file.

It lives at ``$TORCHCODE_HOME/progress.sqlite3`` (default: the platform's user data
directory). WAL mode and a busy timeout let many checks record at once; every
write is one transaction, so a check killed mid-write loses at most its own record.
A corrupt file is moved aside (never overwritten) and a fresh one started. A store that
cannot be written (a read-only folder or file, a read-only mount) is opened read-only:
reads work, writes raise ``StoreError`` and the caller says what was not saved.
"""

from __future__ import annotations

import os
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from torchcode import paths
from torchcode.errors import StoreError

SCHEMA_VERSION = 2  # 2: attempts.source (the file as checked); a version 1 store is migrated on open
# Added since without a new version (an older torchcode reads such a store as it is, and ignores the column):
# started.pack, added on open where it is missing.
SEED_MIN, SEED_MAX = 0, 2**63 - 1  # what `check --seed` accepts: a SQLite INTEGER, never negative
SCHEMA = """
CREATE TABLE IF NOT EXISTS attempts (
    id INTEGER PRIMARY KEY,
    problem TEXT NOT NULL,
    at REAL NOT NULL,
    verdict TEXT NOT NULL,
    passed INTEGER NOT NULL,
    total INTEGER NOT NULL,
    seconds REAL NOT NULL,
    kernel_seconds REAL NOT NULL,
    sha256 TEXT NOT NULL,
    file TEXT NOT NULL,
    seed INTEGER NOT NULL,
    source BLOB
);
CREATE INDEX IF NOT EXISTS attempts_problem ON attempts(problem);
CREATE TABLE IF NOT EXISTS hints (
    problem TEXT PRIMARY KEY,
    revealed INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS started (
    directory TEXT NOT NULL,
    problem TEXT NOT NULL,
    file TEXT NOT NULL,
    at REAL NOT NULL,
    pack TEXT,
    PRIMARY KEY (directory, problem)
);
"""


def stored_text(path) -> str:
    """A path as text SQLite can hold: a name that is not UTF-8 (a byte read as a lone surrogate) is written
    escaped (``\\xff``), never a crash. For what is only shown (an attempt's file)."""
    return os.fspath(path).encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _key(path) -> str | bytes:
    """A path SQLite can hold and give back unchanged: text, or (a name that is not UTF-8) its bytes."""
    text = os.fspath(path)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return os.fsencode(text)
    return text


def _path_text(value) -> str:
    """The inverse of ``_key``."""
    return os.fsdecode(value) if isinstance(value, bytes) else value


@dataclass
class ProblemProgress:
    problem: str
    attempts: int = 0
    solved: bool = False
    best_seconds: float | None = None  # fastest accepted run of the learner's code over all cases
    last_verdict: str = ""
    last_at: float | None = None
    last_passed: int = 0
    last_total: int = 0

    @property
    def status(self) -> str:
        return "solved" if self.solved else "attempted" if self.attempts else "todo"


class Store:
    busy_timeout_s = 30  # how long a write waits for another one (a check recording at the same time) to finish

    def __init__(self, path: Path | None = None):
        self.path = Path(path) if path else paths.progress_db()
        self.warnings: list[str] = []
        self.read_only: str | None = None  # why the store could only be opened read-only
        self._conn: sqlite3.Connection | None = None
        self._empty = False  # opened read-only before any table was created: nothing recorded yet
        self._old = False  # an older schema opened read-only (it could not be migrated): no sources
        self._no_packs = False  # ... older than version 3: started files have no pack

    # -- connection ---------------------------------------------------------------------------
    def _connect(self) -> sqlite3.Connection:
        if self._conn is not None:
            return self._conn
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise StoreError(f"cannot create the data directory {self.path.parent}: {e.strerror}. "
                             "Set TORCHCODE_HOME to a writable folder.") from None
        try:
            self._conn = self._open_waiting()
        except sqlite3.DatabaseError as e:
            if self._is_unwritable(e) and self.path.is_file():
                self._conn = self._open_read_only(e)
            elif self._is_corrupt(e):
                self._move_aside(e)
                self._conn = self._open()
            elif self._is_locked(e):
                raise StoreError(self._locked(e)) from None
            else:
                raise StoreError(f"cannot open the progress store {self.path}: {e}. It must be a file torchcode can "
                                 "create and write there: fix that, or set TORCHCODE_HOME to a writable folder.") from None
        return self._conn

    def _open_waiting(self) -> sqlite3.Connection:
        """``_open``, tried again while the store is locked, for up to the busy timeout in all: SQLite gives up at
        once, not after its busy timeout, where waiting could deadlock (CI: one of twenty processes opening a new
        store at once was told "database is locked", its record lost)."""
        deadline = time.monotonic() + self.busy_timeout_s
        while True:
            try:
                return self._open()
            except sqlite3.DatabaseError as e:
                if not self._is_locked(e) or time.monotonic() >= deadline:
                    raise
            time.sleep(0.05)

    def _open(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=self.busy_timeout_s, isolation_level=None)
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_s * 1000)}")
            conn.execute("PRAGMA synchronous = NORMAL")  # with WAL: a crash never corrupts, one fsync per checkpoint
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise StoreError(f"{self.path} was written by a newer torchcode (schema {version}); upgrade torchcode")
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            if "attempts" not in tables:
                conn.execute("PRAGMA journal_mode = WAL")
                conn.executescript("BEGIN IMMEDIATE;" + SCHEMA + f"PRAGMA user_version = {SCHEMA_VERSION}; COMMIT;")
            elif version < SCHEMA_VERSION:
                self._migrate(conn)
            if not self._has_packs(conn):
                self._add_packs(conn)
            # No full scan here (it grows with the history): a damaged page raises "malformed"
            # when a query touches it, and _use() moves the file aside then.
        except BaseException:
            conn.close()
            raise
        return conn

    @staticmethod
    def _migrate(conn: sqlite3.Connection) -> None:
        """Bring an older store up to date in one transaction, keeping every row. Two processes may
        race here: the write lock serialises them and the second finds nothing left to do."""
        conn.execute("BEGIN IMMEDIATE")
        try:
            columns = {r[1] for r in conn.execute("PRAGMA table_info(attempts)")}
            if "source" not in columns:  # version 1 -> 2
                conn.execute("ALTER TABLE attempts ADD COLUMN source BLOB")
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    @staticmethod
    def _has_packs(conn: sqlite3.Connection) -> bool:
        return "pack" in {r[1] for r in conn.execute("PRAGMA table_info(started)")}

    def _add_packs(self, conn: sqlite3.Connection) -> None:
        """started.pack, in one transaction; two processes may race here: the second finds it there."""
        conn.execute("BEGIN IMMEDIATE")
        try:
            if not self._has_packs(conn):
                conn.execute("ALTER TABLE started ADD COLUMN pack TEXT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def _open_read_only(self, cause: sqlite3.DatabaseError) -> sqlite3.Connection:
        """Open a store this process cannot write. ``mode=ro`` still needs the WAL index beside the
        file; in a read-only folder only ``immutable=1`` opens it (nothing can write it then anyway)."""
        uri = self.path.resolve().as_uri()
        error: Exception = cause
        for query in ("mode=ro", "immutable=1"):
            conn = None
            try:
                conn = sqlite3.connect(f"{uri}?{query}", uri=True, timeout=30, isolation_level=None)
                version = conn.execute("PRAGMA user_version").fetchone()[0]
                tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            except sqlite3.DatabaseError as e:
                if conn is not None:
                    conn.close()
                error = e
                continue
            if version > SCHEMA_VERSION:
                conn.close()
                raise StoreError(f"{self.path} was written by a newer torchcode (schema {version}); upgrade torchcode")
            self._empty = "attempts" not in tables
            self._old = version < 2  # an older store read as it is: no sources kept
            self._no_packs = self._empty or not self._has_packs(conn)
            self.read_only = str(cause)
            return conn
        raise StoreError(f"cannot open the progress store {self.path}: {cause}; read-only: {error}") from None

    @staticmethod
    def _is_unwritable(e: Exception) -> bool:
        name = getattr(e, "sqlite_errorname", "")
        return name.startswith(("SQLITE_READONLY", "SQLITE_CANTOPEN", "SQLITE_PERM")) or "readonly" in str(e)

    @staticmethod
    def _is_corrupt(e: Exception) -> bool:
        text = str(e).lower()
        return any(s in text for s in ("not a database", "malformed", "file is encrypted", "no such column", "no such table"))

    def _move_aside(self, e: Exception) -> None:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        aside = self.path.with_name(f"{self.path.name}.corrupt-{stamp}-{os.getpid()}")
        try:
            os.replace(self.path, aside)
            for suffix in ("-wal", "-shm"):
                side = self.path.with_name(self.path.name + suffix)
                if side.exists():
                    os.replace(side, aside.with_name(aside.name + suffix))
        except OSError as err:
            raise StoreError(f"the progress store {self.path} is corrupt ({e}) and cannot be moved aside: {err.strerror}") from None
        self.warnings.append(f"the progress store was corrupt ({e}); it was moved to {aside} and a fresh one started")

    def _use(self, action):
        """Run ``action(conn)``; a corrupt file found on the way is moved aside and the action retried once."""
        for attempt in (1, 2):
            conn = self._connect()
            try:
                return action(conn)
            except sqlite3.DatabaseError as e:
                if conn.in_transaction:
                    try:
                        conn.execute("ROLLBACK")
                    except sqlite3.DatabaseError:
                        pass
                if (attempt == 2 or self.read_only or not self._is_corrupt(e)
                        or isinstance(e, sqlite3.OperationalError) and "locked" in str(e)):
                    raise
                self.close()
                self._move_aside(e)

    def _write(self, sql: str, args: tuple, before_commit: Callable[[], None] | None = None) -> int:
        """One transaction; returns how many rows it changed. ``before_commit()`` runs inside it; if it
        raises, nothing is written."""
        def write(conn):
            conn.execute("BEGIN IMMEDIATE")
            try:
                changed = conn.execute(sql, args).rowcount
                if before_commit is not None:
                    before_commit()
            except BaseException:
                try:
                    conn.execute("ROLLBACK")
                except sqlite3.Error:
                    pass  # the connection is closed with the process; SQLite rolls back then
                raise
            conn.execute("COMMIT")
            return changed

        self._connect()
        if self.read_only:
            raise StoreError(f"the progress store {self.path} is read-only here ({self.read_only}). "
                             "Set TORCHCODE_HOME to a writable folder.")
        try:
            return self._use(write)
        except (sqlite3.DatabaseError, OverflowError) as e:
            if self._is_locked(e):
                raise StoreError(self._locked(e)) from None
            raise StoreError(f"cannot write the progress store {self.path}: {e}. "
                             "Set TORCHCODE_HOME to a writable folder.") from None

    def _read(self, sql: str, args: tuple = ()) -> list[tuple]:
        if not self.path.exists():
            return []
        self._connect()
        if self._empty:
            return []
        try:
            return self._use(lambda conn: conn.execute(sql, args).fetchall())
        except sqlite3.DatabaseError as e:
            raise StoreError(self._locked(e) if self._is_locked(e) else
                             f"cannot read the progress store {self.path}: {e}") from None

    @staticmethod
    def _is_locked(e: Exception) -> bool:
        return isinstance(e, sqlite3.OperationalError) and "locked" in str(e)

    def _locked(self, e: Exception) -> str:
        """A lock held past the busy timeout is another program's (a SQLite browser left in a transaction, a
        stuck process), not a folder to change: say so, and what to do."""
        return (f"the progress store {self.path} is locked ({e}): another program has held it for over "
                f"{self.busy_timeout_s:g} s (a database browser with unsaved changes, or a stuck torchcode). "
                "Close that program and run the command again")

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    # -- records --------------------------------------------------------------------------------
    def record_attempt(self, *, problem: str, verdict: str, passed: int, total: int, seconds: float,
                       kernel_seconds: float, sha256: str, file: str, seed: int, source: bytes | None = None,
                       before_commit: Callable[[], None] | None = None) -> None:
        """Record one check (``source``: the file's bytes as checked, for `history`). ``before_commit`` may
        still call it off (by raising): then nothing is recorded."""
        if not SEED_MIN <= seed <= SEED_MAX:
            raise StoreError(f"the seed {seed} cannot be recorded: seeds go from {SEED_MIN} to {SEED_MAX}")
        self._write("INSERT INTO attempts (problem, at, verdict, passed, total, seconds, kernel_seconds, sha256, file, seed,"
                    " source) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (problem, time.time(), verdict, passed, total, seconds, kernel_seconds, sha256, stored_text(file), seed,
                     None if source is None else bytes(source)),
                    before_commit)

    ATTEMPT_COLUMNS = ("problem", "at", "verdict", "passed", "total", "seconds", "kernel_seconds", "sha256", "file", "seed")

    def attempts(self, problem: str | None = None) -> list[dict]:
        cols = self.ATTEMPT_COLUMNS
        sql = f"SELECT {', '.join(cols)} FROM attempts" + (" WHERE problem = ?" if problem else "") + " ORDER BY id"
        return [dict(zip(cols, r)) for r in self._read(sql, (problem,) if problem else ())]

    def history(self, problem: str) -> list[dict]:
        """One problem's attempts, oldest first, each with ``id`` and ``has_source`` (sources are read one at a
        time with ``source()``: the listing never loads them)."""
        cols = ("id",) + self.ATTEMPT_COLUMNS
        kept = "source IS NOT NULL" if self._sources_kept() else "0"
        rows = self._read(f"SELECT {', '.join(cols)}, {kept} FROM attempts WHERE problem = ? ORDER BY id", (problem,))
        return [dict(zip(cols + ("has_source",), r[:-1] + (bool(r[-1]),))) for r in rows]

    def source(self, attempt_id: int) -> bytes | None:
        """The file as it was checked in attempt ``attempt_id`` (None: recorded before sources were kept)."""
        if not self._sources_kept():
            return None
        rows = self._read("SELECT source FROM attempts WHERE id = ?", (attempt_id,))
        return bytes(rows[0][0]) if rows and rows[0][0] is not None else None

    def _sources_kept(self) -> bool:
        """False for an older store opened read-only (no source column); a missing store has nothing at all."""
        if self.path.exists():
            self._connect()
        return not self._old

    def forget_attempts(self, problem: str) -> int:
        """Delete every attempt of ``problem`` (nothing else: hints and started files stay); return how many."""
        return self._write("DELETE FROM attempts WHERE problem = ?", (problem,))

    def progress(self) -> dict[str, ProblemProgress]:
        """Per problem: attempts, solved, best kernel time, and the last attempt (one aggregate query)."""
        rows = self._read(
            "SELECT a.problem, agg.n, agg.solved, agg.best, a.verdict, a.at, a.passed, a.total FROM "
            "(SELECT problem, count(*) AS n, max(verdict = 'accepted') AS solved, "
            "        min(CASE WHEN verdict = 'accepted' THEN kernel_seconds END) AS best, max(id) AS last "
            " FROM attempts GROUP BY problem) AS agg JOIN attempts AS a ON a.id = agg.last")
        return {r[0]: ProblemProgress(problem=r[0], attempts=r[1], solved=bool(r[2]), best_seconds=r[3],
                                      last_verdict=r[4], last_at=r[5], last_passed=r[6], last_total=r[7])
                for r in rows}

    def is_solved(self, problem: str) -> bool:
        return bool(self._read("SELECT 1 FROM attempts WHERE problem = ? AND verdict = 'accepted' LIMIT 1", (problem,)))

    def hints_revealed(self, problem: str) -> int:
        rows = self._read("SELECT revealed FROM hints WHERE problem = ?", (problem,))
        return rows[0][0] if rows else 0

    def reveal_hint(self, problem: str, available: int) -> int:
        """Reveal one more hint (up to ``available``); return how many are revealed now."""
        n = min(self.hints_revealed(problem) + 1, available)
        self._write("INSERT INTO hints (problem, revealed) VALUES (?, ?) "
                    "ON CONFLICT(problem) DO UPDATE SET revealed = max(revealed, excluded.revealed)", (problem, n))
        return n

    def mark_started(self, directory: Path, problem: str, file: Path, pack: Path | None = None) -> None:
        """``file`` is what ``directory`` works on for ``problem``; ``pack`` the problem pack it came from (None:
        the built-in course), so that later commands run there find it without --problems-dir."""
        self._write("INSERT INTO started (directory, problem, file, at, pack) VALUES (?, ?, ?, ?, ?) "
                    "ON CONFLICT(directory, problem) DO UPDATE SET file = excluded.file, at = excluded.at, "
                    "pack = excluded.pack",
                    (_key(directory), problem, _key(file), time.time(), None if pack is None else _key(pack)))

    def repoint_pack(self, directory: Path, problem: str, pack: Path) -> None:
        """The pack ``problem`` started in ``directory`` comes from is now ``pack`` (the old one moved)."""
        self._write("UPDATE started SET pack = ? WHERE directory = ? AND problem = ?",
                    (_key(pack), _key(directory), problem))

    def started_packs(self, directory: Path) -> dict[str, str]:
        """problem -> the pack it was started from in ``directory``, for problems started from a pack, the latest
        started first."""
        if self.path.exists():
            self._connect()
        if self._no_packs:
            return {}
        rows = self._read("SELECT problem, pack FROM started WHERE directory = ? AND pack IS NOT NULL ORDER BY at DESC",
                          (_key(directory),))
        return {problem: _path_text(pack) for problem, pack in rows}

    def last_started(self, directory: Path) -> tuple[str, str] | None:
        rows = self._read("SELECT problem, file FROM started WHERE directory = ? ORDER BY at DESC LIMIT 1",
                          (_key(directory),))
        return (rows[0][0], _path_text(rows[0][1])) if rows else None

    def started_file(self, directory: Path, problem: str) -> str | None:
        rows = self._read("SELECT file FROM started WHERE directory = ? AND problem = ?", (_key(directory), problem))
        return _path_text(rows[0][0]) if rows else None

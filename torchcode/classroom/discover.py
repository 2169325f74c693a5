"""Finding the submissions: ``SUBMISSIONS/<student>/<problem>.py``, or a zip of that layout.

Anything else (a loose file, an unknown problem, a nested folder, a notes.txt) is listed as
unknown, never fatal. A zip is unpacked into a folder the caller owns, member by member:
names that would leave it (``../x``, absolute paths), links, oversized members and members
that cannot be unpacked (corrupt, encrypted, a name that is a file and a folder) are listed and
skipped.
"""

from __future__ import annotations

import hashlib
import os
import stat
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from torchcode.classroom.gradebook import is_gradebook
from torchcode.errors import Unreadable, UsageError

MAX_FILE = 1 << 20  # a submission larger than 1 MB is not a kernel
MAX_ZIP_TOTAL = 512 << 20
IGNORED = {"__MACOSX", "__pycache__", ".DS_Store", ".ipynb_checkpoints"}
MAX_HELPERS = 32  # modules beside a submission that --ray ships with it (the first, by name)
MAX_DEPTH = 16  # folders a zip member may be nested in (class/student/...): deeper, Python's own folder tools recurse


@dataclass(frozen=True)
class Submission:
    student: str
    problem: str
    path: Path
    sha256: str
    folder: str = ""  # the digest of the other files in the student's folder ("" if none): see folder_digest

    def fingerprint(self, problem_fp: str) -> str:
        """What its result depends on besides this file and the seed: the problem's fingerprint, and the other
        files of its folder (helper modules it may import, data it may read: a rerun grades it again when they
        change, though the file itself did not)."""
        if not self.folder:
            return problem_fp
        return hashlib.sha256(f"{problem_fp}\nfolder {self.folder}".encode()).hexdigest()

    @property
    def key(self) -> tuple[str, str]:
        return self.student, self.problem


def helper_files(submission: Path) -> dict[str, bytes]:
    """The modules a submission may import from its own folder, by name: the other ``*.py`` files there,
    plain files only (never a link, which could lead out of the student's folder), each at most MAX_FILE,
    the first MAX_HELPERS by name: what ``grade --ray`` ships with the submission (a rerun compares the whole
    folder: ``folder_digest``)."""
    found: dict[str, bytes] = {}
    try:
        entries = sorted(submission.parent.iterdir())
    except OSError:
        return found
    for f in entries:
        if len(found) == MAX_HELPERS:
            break
        if f.suffix != ".py" or f.name == submission.name or _ignored(f):
            continue
        try:
            fd = os.open(f, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))  # no link, no pipe's wait
        except OSError:
            continue
        with os.fdopen(fd, "rb") as fh:
            st = os.fstat(fd)
            if stat.S_ISREG(st.st_mode) and st.st_size <= MAX_FILE:
                data = fh.read(MAX_FILE + 1)
                if len(data) <= MAX_FILE:
                    found[f.name] = data
    return found


@dataclass
class Discovery:
    root: Path  # the folder holding one folder per student
    submissions: list[Submission] = field(default_factory=list)
    students: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)  # "path: why", relative to the input
    unreadable: dict[tuple[str, str], str] = field(default_factory=dict)  # (student, problem) -> why, not graded


def discover(source: Path, problems: list[str], unpack_to: Path, skip: Path | None = None,
             known: tuple[str, ...] = ()) -> Discovery:
    """Submissions for ``problems`` under ``source`` (a folder or a .zip, unpacked into ``unpack_to``);
    ``skip`` (the output folder, when it lies among the student folders) is not a student; files of the
    ``known`` problems not asked for are passed over quietly."""
    if not source.exists():
        raise UsageError(f"no such folder or zip: {source}")
    unknown: list[str] = []
    if not source.is_dir():  # a file, or a device or a named pipe (/dev/null): a zip, or nothing to grade
        if not source.is_file() or not zipfile.is_zipfile(source):
            raise UsageError(f"{source} is neither a folder nor a zip file: give the folder that holds one "
                             "folder per student (or a zip of it)")
        unknown += unzip(source, unpack_to)
        source = unpack_to
    try:
        root = _class_root(source)
    except OSError as e:
        raise UsageError(f"cannot read the folder {source}: {e.strerror or e}") from None
    found = Discovery(root=root, unknown=unknown)
    wanted = set(problems)
    skip = skip.resolve() if skip is not None else None
    entries = sorted(root.iterdir())
    taken = {e.name for e in entries if text_name(e.name) == e.name}  # names no escaping changes: kept as they are
    for entry in entries:
        if entry.name.startswith(".") and entry.name not in IGNORED and _holds_submission(entry, wanted, skip):
            found.unknown.append(f"{_rel(entry, source)}/: a hidden folder (its name starts with '.'): not graded; "
                                 "rename it if it is a student's")
            continue
        if _ignored(entry) or entry.resolve() == skip:
            continue
        if entry.is_symlink() or not entry.is_dir():
            found.unknown.append(f"{_rel(entry, source)}: not a student folder")
            continue
        try:  # a folder that cannot be listed (by the grader's worker either, as root) is said, never a traceback
            files = sorted(entry.iterdir())
            if not Unreadable.allowed(entry.stat(), "rx"):
                raise PermissionError(13, "Permission denied")
            # an earlier output holds a gradebook we wrote and no Python file (a student's file of that name
            # is no reason to pass over their work)
            earlier = not any(f.suffix == ".py" for f in files) and is_gradebook(entry / "gradebook.sqlite3")
        except OSError as e:
            found.unknown.append(f"{_rel(entry, source)}/: cannot be read ({e.strerror or e}): not graded; make it "
                                 "readable (chmod u+rx) and run again")
            continue
        if earlier:  # an earlier run's --out among the students: not a student
            found.unknown.append(f"{_rel(entry, source)}/: an earlier `torchcode grade` output (--out), not a student")
            continue
        student = text_name(entry.name, taken)
        taken.add(student)
        has_any, hashed = False, {}  # the folder's files are read once for all its submissions' digests
        for f in files:
            why = _why_not(f, wanted, set(known))
            if why is None:
                try:
                    Unreadable.check(f)  # as root too: the worker, without root's powers, could not read it
                    data = f.read_bytes()
                except (Unreadable, OSError) as e:  # not_graded (exit 1), never 'missing': a rerun grades it
                    reason = e.strerror if isinstance(e, OSError) and e.strerror else "Permission denied"
                    found.unreadable[(student, f.stem)] = (f"the file cannot be read ({reason}): make it readable "
                                                              "(chmod u+r) and run again")
                    has_any = True
                    continue
                found.submissions.append(Submission(student, f.stem, f.resolve(), hashlib.sha256(data).hexdigest(),
                                                    folder_digest(entry, f, hashed)))
                has_any = True
            elif why:
                found.unknown.append(f"{_rel(f, source)}: {why}")
        found.students.append(student)
        if not has_any:
            found.unknown.append(f"{_rel(entry, source)}/: no submission for {_listing(problems)}")
    return found


MAX_FOLDER_ENTRIES = 1000


def folder_digest(folder: Path, submission: Path, hashed: dict | None = None) -> str:
    """A digest of everything in ``folder`` but ``submission`` (its name, kind and contents, or a link's target;
    past MAX_FILE, its size and time instead), or "" when there is nothing else: what the submission may import
    or read beside itself. ``hashed``: the contents' digests already read in this folder (for its other
    submissions: a folder of many files is read once, not once per submission)."""
    hashed = {} if hashed is None else hashed
    h, seen = hashlib.sha256(), 0
    # what a grade never reads (Finder's .DS_Store, Jupyter's checkpoints, caches) changes no digest
    todo = [p for p in sorted(folder.iterdir()) if p.name != submission.name and p.name not in IGNORED]
    while todo and seen < MAX_FOLDER_ENTRIES:
        p, seen = todo.pop(0), seen + 1
        rel = p.relative_to(folder).as_posix()
        try:
            st = p.lstat()
            if stat.S_ISLNK(st.st_mode):
                h.update(f"link {rel} -> {p.readlink()}\n".encode(errors="backslashreplace"))
            elif stat.S_ISDIR(st.st_mode):
                h.update(f"dir {rel}\n".encode(errors="backslashreplace"))
                todo += [c for c in sorted(p.iterdir()) if c.name not in IGNORED]
            elif stat.S_ISREG(st.st_mode) and st.st_size <= MAX_FILE:
                key = (rel, st.st_size, st.st_mtime_ns)
                if key not in hashed:
                    hashed[key] = hashlib.sha256(p.read_bytes()).hexdigest()
                h.update(f"file {rel} {hashed[key]}\n".encode(errors="backslashreplace"))
            else:
                h.update(f"other {rel} {st.st_mode} {st.st_size} {st.st_mtime_ns}\n".encode(errors="backslashreplace"))
        except OSError as e:
            h.update(f"unreadable {rel} {e.errno}\n".encode(errors="backslashreplace"))
    if seen == 0:
        return ""
    if todo:
        h.update(f"and {len(todo)} more\n".encode())
    return h.hexdigest()


def _why_not(f: Path, wanted: set[str], known: set[str]) -> str | None:
    """None for a submission, "" for a file quietly skipped, else why it is not a submission."""
    if _ignored(f):
        return ""
    if f.is_symlink():
        return "a link, not a file"
    if f.is_dir():
        return "a folder inside a student folder"
    if f.suffix == ".py" and not f.is_file():  # a named pipe (a tar can make one) would be waited on forever
        return "not a regular file"
    if f.suffix != ".py":
        return "not a .py file"
    if f.stem not in wanted:
        return "" if f.stem in known else "not a problem being graded (a module the student's files may import)"
    if f.stat().st_size > MAX_FILE:
        return f"larger than {MAX_FILE >> 20} MB"
    return None


def _class_root(folder: Path) -> Path:
    """Go down through wrapper folders (an LMS export unpacks to ``export/class/<student>/...``):
    while a folder holds exactly one folder and nothing else, and that one holds folders."""
    while True:
        entries = [e for e in folder.iterdir() if not _ignored(e)]
        if len(entries) != 1 or not entries[0].is_dir() or entries[0].is_symlink():
            return folder
        inner = entries[0]
        if not any(e.is_dir() and not _ignored(e) for e in inner.iterdir()):
            return folder
        folder = inner


def unzip(archive: Path, dest: Path) -> list[str]:
    """Unpack ``archive`` into ``dest`` safely; return the members skipped, with why."""
    skipped: list[str] = []
    dest.mkdir(parents=True, exist_ok=True)
    total = 0
    try:  # the central directory is read here, whole: one damaged entry makes the archive unreadable
        z = zipfile.ZipFile(archive)
    except (zipfile.BadZipFile, UnicodeDecodeError, ValueError, EOFError, OSError, NotImplementedError) as e:
        raise UsageError(f"{archive} cannot be read as a zip ({type(e).__name__}: {str(e)[:200]}), e.g. a member "
                         "whose name is not the UTF-8 the zip claims: unpack it with another tool and grade the "
                         "folder") from None
    copies: dict[tuple[str, ...], int] = {}  # member path -> how many copies of it the zip holds
    empty: list[Path] = []  # folders the zip names that may hold nothing unpacked
    graded: dict[tuple[str, ...], int] = {}  # member path -> which copy is on disk (the last one unpacked)
    with z:
        for info in z.infolist():
            info.filename = _member_name(info)
            name = PurePosixPath(info.filename.replace("\\", "/"))
            mode = info.external_attr >> 16
            if name.is_absolute() or ".." in name.parts or not name.parts:
                if not info.is_dir():
                    skipped.append(f"{info.filename}: unsafe name in the zip (outside the folder), skipped")
                continue
            if len(name.parts) > MAX_DEPTH:
                skipped.append(f"{info.filename[:200]}: nested more than {MAX_DEPTH} folders deep in the zip, skipped")
                continue
            if any(p in IGNORED for p in name.parts):
                continue
            target = dest.joinpath(*name.parts)
            if info.is_dir():
                empty.append(target)  # made below once the class folder is known (it may be a student's)
                continue
            copies[name.parts] = copies.get(name.parts, 0) + 1
            if stat.S_ISLNK(mode):
                skipped.append(f"{info.filename}: a link inside the zip, skipped")
                empty.append(target.parent)
                continue
            if info.file_size > MAX_FILE or total + info.file_size > MAX_ZIP_TOTAL:
                skipped.append(f"{info.filename}: too large ({info.file_size} bytes), skipped")
                empty.append(target.parent)
                continue
            try:
                with z.open(info) as src:
                    data = src.read(MAX_FILE + 1)  # the header's size may lie
            except (zipfile.BadZipFile, zlib.error, EOFError, RuntimeError, NotImplementedError, OSError) as e:
                skipped.append(f"{info.filename}: cannot be read from the zip ({e}), skipped")  # corrupt, encrypted
                continue
            if len(data) > MAX_FILE:
                skipped.append(f"{info.filename}: too large, skipped")
                empty.append(target.parent)
                continue
            try:  # a name that is a file in one member and a folder in another, a name the system refuses
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
            except (OSError, ValueError) as e:
                skipped.append(f"{info.filename}: cannot be unpacked ({getattr(e, 'strerror', None) or e}), skipped")
                continue
            total += len(data)
            graded[name.parts] = copies[name.parts]
    # A folder with nothing unpacked in it (a folder entry, or a member skipped) is made only inside the class folder,
    # found from the files unpacked: a student whose only file was skipped still has a folder, and so a row, as in a
    # class given as a folder; an empty folder beside the class in a wrapper (export/notes/) does not stop the
    # descent to the class.
    root = _class_root(dest).resolve()
    for folder in empty:
        if root in folder.resolve().parents:
            _make_folder(folder, os.path.relpath(folder, dest) + "/", skipped)
    for parts, n in copies.items():
        if n > 1 and parts in graded:  # as unzip and zip's own update append them: the last copy is the newest
            which = "the last copy" if graded[parts] == n else f"copy {graded[parts]} (the last one unpacked)"
            skipped.append(f"{'/'.join(parts)}: in the zip {n} times; {which} is graded, the others skipped")
    return skipped


def _make_folder(folder: Path, member: str, skipped: list[str]) -> bool:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        return True
    except (OSError, ValueError) as e:  # a file of the same name unpacked before, a name the system refuses
        skipped.append(f"{member}: cannot be unpacked ({getattr(e, 'strerror', None) or e}), skipped")
        return False


def where_they_are(root: Path, problems: list[str], typed: str) -> str:
    """When no submission was found: PROBLEM.py files one level too high (one student's folder given) or too deep
    (section folders holding the students' folders), said with the command that grades them; else ""."""
    import shlex

    wanted = {f"{p}.py" for p in problems}

    def files(folder: Path) -> list[Path]:
        try:
            return sorted(f for f in folder.iterdir() if f.name in wanted and f.is_file() and not f.is_symlink())
        except OSError:
            return []

    here = files(root)
    zipped = Path(typed).is_file()
    if here:
        fix = ("zip the students' folders instead" if zipped else
               f"give the folder that holds the students' folders (`torchcode grade {shlex.quote(os.path.relpath(root.resolve().parent))}`)")
        return (f" {typed} itself holds {', '.join(f.name for f in here[:3])}: it looks like one student's files, "
                f"not a class. Put them in a folder named after the student and {fix}")
    deeper = []
    for group in sorted(d for d in root.iterdir() if d.is_dir() and not d.is_symlink() and not _ignored(d)):
        for student in sorted(d for d in group.iterdir() if d.is_dir() and not d.is_symlink() and not _ignored(d)):
            if files(student):
                deeper.append(group)
                break
    if deeper:
        names = ", ".join(g.name + "/" for g in deeper[:4]) + ("..." if len(deeper) > 4 else "")
        if zipped:
            how = "unpack the zip and grade each group's folder on its own"
        else:
            how = "grade each group on its own: " + " and ".join(
                f"`torchcode grade {shlex.quote(str(g))} --out {shlex.quote('grades-' + g.name)}`" for g in deeper[:2])
            how += f" (and {len(deeper) - 2} more)" if len(deeper) > 2 else ""
        return (f" The PROBLEM.py files are one folder deeper, in {names}: if those are groups (sections) of "
                f"students' folders, {how}")
    return ""


def _member_name(info: zipfile.ZipInfo) -> str:
    """A name without the zip's UTF-8 flag is CP437 by the format, but macOS's Archive Utility, Java tools and LMS
    exports write UTF-8 there: bytes that read as UTF-8 are taken as such (José, where CP437 made 'Jos├⌐')."""
    if info.flag_bits & 0x800:
        return info.filename
    try:
        return info.filename.encode("cp437").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return info.filename


def text_name(name: str, taken: set[str] = frozenset()) -> str:
    """A student's name as text every output can hold: a folder name that is not UTF-8 (its bytes read as lone
    surrogates) is written escaped with a short hash of its bytes, ``bad\\xffname-1f2e3d4c`` (the gradebook,
    grades.csv and the terminal would refuse it; the hash keeps it apart from a folder named with a backslash).
    ``taken``: the names already in use (the class's own folder names among them): a folder may be named exactly
    like another's escaped name, and two students never share a row."""
    raw = name.encode("utf-8", "surrogateescape")
    text = raw.decode("utf-8", "backslashreplace")
    if text == name:
        return name
    digest, n = hashlib.sha256(raw).hexdigest(), 0
    escaped = f"{text}-{digest[:8]}"
    while escaped in taken:
        n += 1
        escaped = f"{text}-{hashlib.sha256(raw + b'#%d' % n).hexdigest()[:16]}"
    return escaped


def _holds_submission(entry: Path, wanted: set[str], skip: Path | None) -> bool:
    """A hidden folder worth a notice: one holding a file a student would hand in (not .git, .venv or --out)."""
    try:
        if entry.is_symlink() or not entry.is_dir() or (skip is not None and entry.resolve() == skip):
            return False
        return any(f.suffix == ".py" and f.stem in wanted for f in entry.iterdir())
    except OSError:
        return False


def _ignored(p: Path) -> bool:
    return p.name in IGNORED or p.name.startswith(".")


def _rel(p: Path, base: Path) -> str:
    try:
        return p.relative_to(base).as_posix()
    except ValueError:
        return str(p)


def _listing(problems: list[str]) -> str:
    return ", ".join(problems) if len(problems) <= 4 else f"any of the {len(problems)} problems"

"""What reaches the terminal: streams that survive a closed pipe, the glyph set, inert text.

``setup()`` runs once, at the CLI boundary. It replaces ``sys.stdout`` and ``sys.stderr``
by streams that

- never raise on a closed pipe (``torchcode check | head -1``): the rest of the output goes
  to /dev/null, so the command still ends with its own exit code (the verdict's);
- encode what they can and show the rest escaped (``\\u2713``) instead of crashing;
- are plain ASCII when the locale's character set is not UTF-8 (``LANG=C``), even though
  Python itself switched to UTF-8 for such a locale (PEP 538/540).

``glyphs()`` is the one place that picks ✓/✗/… or their ASCII stand-ins: it asks whether
the stream can encode them. ``inert()`` shows text a submission controls (printed output,
exception messages, source lines) without letting it drive the terminal.
"""

from __future__ import annotations

import codecs
import io
import os
import re
import sys

UNICODE = {"pass": "✓", "fail": "✗", "skip": "·", "more": "…", "warn": "!"}
ASCII = {"pass": "+", "fail": "x", "skip": "-", "more": "...", "warn": "!"}

# Characters rich draws on its own (markdown bullets and rules, ellipses), one ASCII cell each,
# used by the streams' error handler; anything else unencodable is written as \uXXXX.
_STAND_INS = {"…": ".", "•": "*", "·": "-", "✓": "+", "✗": "x", "─": "-", "━": "=", "│": "|", "┃": "|",
              "‘": "'", "’": "'", "“": '"', "”": '"', "–": "-", "—": "-", "×": "x", "→": ">", "▌": "|"}
_ERRORS = "torchcode-ascii"


def _stand_in(err: UnicodeError):
    if not isinstance(err, UnicodeEncodeError):
        raise err
    bad = err.object[err.start:err.end]
    return "".join(_STAND_INS.get(c) or c.encode("ascii", "backslashreplace").decode() for c in bad), err.end


codecs.register_error(_ERRORS, _stand_in)


def can_encode(encoding: str | None, text: str = "".join(UNICODE.values())) -> bool:
    try:
        text.encode(encoding or "ascii")
    except (UnicodeError, LookupError):
        return False
    return True


def glyphs(stream=None) -> dict[str, str]:
    """The marks to draw on ``stream`` (default: stdout): Unicode when it can encode them, else ASCII."""
    stream = stream or sys.stdout
    return UNICODE if can_encode(getattr(stream, "encoding", None)) else ASCII


def locale_is_utf8(environ=os.environ) -> bool:
    """Whether the user's locale (LC_ALL, LC_CTYPE, LANG, the first one set) names UTF-8.

    Python coerces a C locale to C.UTF-8 and sets LC_CTYPE to say so (PEP 538); that LC_CTYPE
    is Python's choice, not the user's, so it is skipped (UTF-8 mode is on exactly then).
    Nothing set at all is the C locale: ASCII.
    """
    if os.name != "posix":
        return True
    for var in ("LC_ALL", "LC_CTYPE", "LANG"):
        value = environ.get(var, "")
        if var == "LC_CTYPE" and sys.flags.utf8_mode and value in ("C.UTF-8", "C.utf8", "UTF-8"):
            continue
        if value:
            name = value.split("@", 1)[0]
            codeset = name.partition(".")[2] if "." in name else name
            return codeset.lower().replace("-", "") == "utf8"
    return False


class _PipeSafe(io.RawIOBase):
    """A file descriptor for writing; once the reader has closed the pipe, writes go nowhere."""

    def __init__(self, fd: int):
        self._fd = fd
        self.reader_gone = False

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def isatty(self) -> bool:
        return os.isatty(self._fd)

    def write(self, data) -> int:
        if self.reader_gone:
            return len(data)
        try:
            return os.write(self._fd, data)
        except BrokenPipeError:
            self.reader_gone = True
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._fd)  # anything else writing to this descriptor is silent too
            os.close(devnull)
            return len(data)


def setup() -> None:
    """Make stdout and stderr pipe-safe and encoding-safe (the CLI calls this before anything prints)."""
    plain = not locale_is_utf8()
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        try:
            fd = stream.fileno()
            stream.flush()
        except (AttributeError, OSError, ValueError):
            continue  # not a real file (an embedding, a test's capture): leave it alone
        encoding = stream.encoding or "ascii"
        if plain and codecs.lookup(encoding).name == "utf-8":
            encoding = "ascii"  # LANG=C: Python chose UTF-8, the terminal did not
        wrapped = io.TextIOWrapper(io.BufferedWriter(_PipeSafe(fd)), encoding=encoding, errors=_ERRORS,
                                   line_buffering=stream.line_buffering or name == "stderr")
        setattr(sys, name, wrapped)


def finish() -> None:
    """Flush both streams before exiting (a closed pipe is not an error)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass


# C0 and C1 control characters (but newline and tab), DEL, the bidirectional overrides that
# reorder what is displayed, and lone surrogates (an exception may carry "\ud800": no terminal,
# file or page can hold one): none of them reaches the terminal from text a submission controls.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_NAMED = {"\r": "\\r", "\x1b": "\\x1b"}


def _escape(m: re.Match) -> str:
    c = m.group()
    return _NAMED.get(c) or (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")


def inert(text: str) -> str:
    """``text`` with every control sequence made visible: ESC [2J is shown as ``\\x1b[2J``.

    Rich markup is not a concern here: callers put the result in a ``rich.text.Text``
    (never parsed as markup) or print it with ``markup=False``.
    """
    return _UNSAFE.sub(_escape, text.replace("\r\n", "\n"))


def inert_name(name: str) -> str:
    """A file, folder or student name made inert and kept on one line: a newline or tab in it is shown as
    ``\\n`` / ``\\t``, never breaking the line that names it."""
    return _UNSAFE.sub(_escape, name).replace("\n", "\\n").replace("\t", "\\t")

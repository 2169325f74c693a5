"""The scaffolder: render a problem's stub from its jinja2 template, start and reset files.

Never overwrites a learner's file silently: ``start`` refuses without ``force``, and
whatever is replaced is first copied to ``<file>.bak-<timestamp>`` beside it.
"""

from __future__ import annotations

import os
import secrets
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from torchcode.catalog.spec import ProblemSpec
from torchcode.errors import SpecError, UsageError


def docstring(text: str) -> str:
    """``text`` as a module docstring literal (backslashes and triple quotes escaped)."""
    body = text.strip().replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    return f'"""\n{body}\n"""'


def render_stub(spec: ProblemSpec) -> str:
    """The stub for ``spec``, rendered from its template (cached while its sources are unchanged)."""
    from torchcode.cache import DerivedCache

    sources = [spec.template_path, spec.statement_path, spec.folder / "problem.toml"]  # the template sees spec too
    if not all(p.is_file() for p in sources):
        return _render_stub(spec)  # raises the SpecError that names the missing file
    cache = DerivedCache("stubs")
    text = cache.get(str(spec.template_path), sources, lambda: _render_stub(spec))
    cache.save()
    return text


def _render_stub(spec: ProblemSpec, header: str | None = None) -> str:
    """``header`` (a docstring literal) replaces the default one: the statement and how to check."""
    import jinja2

    try:
        source = spec.template_path.read_text(encoding="utf-8")
    except OSError:
        raise SpecError(spec.template_path, None, "the stub template is missing",
                        f"create templates/{spec.id}.py.j2 in the pack") from None
    header = header if header is not None else docstring(
        f"{spec.statement()}\n\n---\n"
        f"torchcode problem '{spec.id}'. Check your work with `torchcode check {spec.id}`; "
        f"`torchcode hint {spec.id}` reveals the next hint."
    )
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    try:
        text = env.from_string(source).render(header=header, spec=spec, entry=spec.entry)
    except jinja2.TemplateError as e:
        line = f" (line {e.lineno})" if getattr(e, "lineno", None) else ""  # a syntax error knows its line
        raise SpecError(spec.template_path, None, f"the template does not render: {e}{line}",
                        "fix the jinja2 syntax ({{ header }} is the statement as a docstring)") from None
    try:
        compile(text, str(spec.template_path), "exec")
    except SyntaxError as e:
        raise SpecError(spec.template_path, None, f"the rendered stub is not valid Python (line {e.lineno}: {e.msg})") from None
    return text


def entry_signature(spec: ProblemSpec) -> str:
    """The entry point as the stub declares it, defaults included (``forward(self, x, past_key_value=None, ...)``:
    which arguments a caller may leave out); problem.toml's names alone where the stub cannot be read."""
    import ast

    e = spec.entry
    try:
        tree = ast.parse(render_stub(spec))
    except (SpecError, SyntaxError, OSError, ValueError):
        return e.signature()
    defs = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    found = defs.get(e.name)
    if e.is_module and isinstance(found, ast.ClassDef):
        methods = {n.name: n for n in found.body if isinstance(n, ast.FunctionDef)}
        if "__init__" in methods and "forward" in methods:
            return (f"class {e.name}(nn.Module): __init__({ast.unparse(methods['__init__'].args)}); "
                    f"forward({ast.unparse(methods['forward'].args)})")
    elif not e.is_module and isinstance(found, ast.FunctionDef):
        return f"{e.name}({ast.unparse(found.args)})"
    return e.signature()


@dataclass
class Written:
    path: Path
    backup: Path | None


def backup(path: Path) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    target = path.with_name(f"{path.name}.bak-{stamp}")
    n = 1
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}.bak-{stamp}-{n}")
    try:
        if path.is_symlink():  # the link itself: its target is left as it is, and its content (any file of
            os.symlink(os.readlink(path), target)  # yours, ~/.ssh/id_rsa) is not copied into this folder
        else:
            shutil.copy2(path, target)
    except OSError:
        target.unlink(missing_ok=True)  # no half backup beside the file
        raise
    return target


def write_stub(spec: ProblemSpec, path: Path, *, force: bool = False, text: str | None = None) -> Written:
    """Write the stub (or ``text``) to ``path``; an existing file needs ``force`` and is backed up first."""
    text = render_stub(spec) if text is None else text
    old = None
    if path.exists():
        if not force:
            if path.suffix == ".ipynb":  # reset restores the .py file, never a notebook
                raise UsageError(f"{path} already exists; not overwriting it. Use `torchcode start {spec.id} "
                                 "--notebook --force` (keeps a backup).")
            raise UsageError(f"{path} already exists; not overwriting it. "
                             f"Use `torchcode reset {spec.id}` (keeps a backup) or `start --force`.")
        try:
            old = backup(path)
        except OSError as e:
            raise UsageError(f"cannot keep a backup of {path} beside it ({e.strerror}), so it was left as it is. "
                             "Make the folder writable, or copy your file elsewhere first.") from None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_symlink():  # the link is replaced, never written through: its target may be any file of yours
            # a new file (O_EXCL) of a name no one chose: a fixed one could be a link shipped beside it
            tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.torchcode-stub")
            try:
                with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666), "w",
                               encoding="utf-8") as f:
                    f.write(text)
                os.replace(tmp, path)
            except OSError:
                tmp.unlink(missing_ok=True)
                raise
        else:
            path.write_text(text, encoding="utf-8")
    except OSError as e:
        kept = f"; a copy of your file is at {old}" if old else ""
        raise UsageError(f"cannot write {path}: {e.strerror}{kept}") from None
    return Written(path, old)


def solution_source(spec: ProblemSpec) -> str:
    try:
        return spec.solution_path.read_text(encoding="utf-8")
    except OSError:
        raise SpecError(spec.solution_path, None, "the reference solution is missing",
                        f"create solutions/{spec.id}.py in the pack") from None

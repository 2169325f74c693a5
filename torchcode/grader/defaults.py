"""Keyword defaults are part of the contract: ``linear_attention(Q, K, V, eps=1e-6)``.

A learner's ``eps=1e-5`` gives nearly the same numbers on most inputs, so differential testing alone
may let it through; callers who leave ``eps`` out still get another function. This reads the learner's
source (trusted side: nothing of the learner's runs here) and compares each literal default of a
contract parameter with the reference's. ``None`` is always allowed (a sentinel resolved in the body),
and so is a default written as an expression (``1 / 10**6``): only literals are compared.
"""

from __future__ import annotations

import ast
import inspect
import math


def problem(source: str | bytes, entry, reference) -> str | None:
    """What is wrong with the learner's defaults, in a sentence, or None. ``source``: the file's bytes
    (read as Python reads them: a BOM, a coding line) or text; ``entry``: the spec's entry (name, kind,
    params, init); ``reference``: the reference function or class."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    node = next((n for n in reversed(tree.body) if getattr(n, "name", None) == entry.name), None)
    if entry.is_module:
        if not isinstance(node, ast.ClassDef):
            return None
        methods = {m.name: m for m in node.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))}
        pairs = [(methods.get("__init__"), getattr(reference, "__init__", None), entry.init, f"{entry.name}.__init__"),
                 (methods.get("forward"), getattr(reference, "forward", None), entry.params, f"{entry.name}.forward")]
    else:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return None
        pairs = [(node, reference, entry.params, entry.name)]
    for fn, ref, names, label in pairs:
        if fn is None or ref is None:
            continue
        said = _compare(fn, ref, tuple(names or ()), label)
        if said:
            return said
    return None


def _compare(fn: ast.FunctionDef, ref, names: tuple[str, ...], label: str) -> str | None:
    try:
        want = {n: p.default for n, p in inspect.signature(ref).parameters.items()
                if p.default is not inspect.Parameter.empty}
    except (TypeError, ValueError):
        return None
    a = fn.args
    positional = [*a.posonlyargs, *a.args]
    given = dict(zip([p.arg for p in positional[len(positional) - len(a.defaults):]], a.defaults))
    given.update({p.arg: d for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None})
    for name in names:
        if want.get(name) is None or name not in given:  # no default, or None (how to pass nothing is free)
            continue
        try:
            got = ast.literal_eval(given[name])
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            continue  # an expression: not compared
        if got is None or _same(got, want[name]):
            continue
        return (f"`{label}` gives `{name}` the default {got!r}, but the contract's default is {want[name]!r}: "
                f"callers who leave `{name}` out expect that. Use `{name}={want[name]!r}`.")
    return None


def _same(got, want) -> bool:
    if isinstance(want, bool) or isinstance(got, bool):
        return type(got) is type(want) and got == want
    if isinstance(want, (int, float)) and isinstance(got, (int, float)):
        return math.isclose(float(got), float(want), rel_tol=1e-12, abs_tol=0.0) or got == want
    return type(got) is type(want) and got == want

"""Keyword defaults are part of the contract: ``linear_attention(Q, K, V, eps=1e-6)``.

A learner's ``eps=1e-5`` gives nearly the same numbers on most inputs, so differential testing alone
may let it through; callers who leave ``eps`` out still get another function. This reads the learner's
source (trusted side: nothing of the learner's runs here) and compares each literal default of a
contract parameter with the reference's. ``None`` is always allowed (a sentinel resolved in the body),
and so is a default written as an expression (``1 / 10**6``): only literals are compared.

The source is not the whole story: a name rebound after its ``def`` (an assignment, a decorator, a
``functools.partial``, a def in a block, ``__defaults__`` set through ``setattr``) gives callers other
defaults than the ``def`` reads. So the worker also reads, after the import and after each case, the
defaults of the object it will call (``effective``: from the function objects themselves, never from
``inspect.signature``, which an assigned ``__signature__`` or ``__wrapped__`` can make say anything),
and the trusted side compares them too (``reported_problem``).
"""

from __future__ import annotations

import ast
import functools
import inspect
import math
import types
# The reader runs in the worker after the learner's code: bound here, when the grader is imported, so that a
# submission that replaces ``builtins.zip`` (or ``types.MethodType``) can neither make the reading raise nor lie.
from builtins import (any, bool, dict, float, int, isinstance, len, list, range, staticmethod, str, tuple,  # noqa: A004
                      type, zip)

from torch._C import Argument, FunctionSchema, ScriptFunction


def problem(source: str | bytes, entry, reference) -> str | None:
    """What is wrong with the learner's defaults, in a sentence, or None. ``source``: the file's bytes
    (read as Python reads them: a BOM, a coding line) or text; ``entry``: the spec's entry (name, kind,
    params, init); ``reference``: the reference function or class."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # the worker said why (or the file changed since)
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


# -- what the worker calls (read there, judged here) -----------------------------------------------------
_FUNCTION = types.FunctionType
_METHOD = types.MethodType
_MAPPINGPROXY = types.MappingProxyType
_PROXY_ITEMS = types.MappingProxyType.items
_DICT_ITEMS = dict.items
_TUPLE_GETITEM = tuple.__getitem__
_BACKWARDS = slice(None, None, -1)
_CODE = _FUNCTION.__dict__["__code__"].__get__
_DEFAULTS = _FUNCTION.__dict__["__defaults__"].__get__
_KWDEFAULTS = _FUNCTION.__dict__["__kwdefaults__"].__get__
_FDICT = _FUNCTION.__dict__["__dict__"].__get__
_METHOD_FUNC = types.MethodType.__dict__["__func__"].__get__
_PARTIAL = functools.partial
_PARTIAL_FUNC = functools.partial.__dict__["func"].__get__
_PARTIAL_KEYWORDS = functools.partial.__dict__["keywords"].__get__
_STATIC_FUNC = staticmethod.__dict__["__func__"].__get__
_TYPE_DICT = type.__dict__["__dict__"].__get__
_TYPE_MRO = type.__dict__["__mro__"].__get__
_FLOAT_REPR = float.__repr__
_INT_REPR = int.__repr__
_INT_BITS = int.bit_length
_INT_LT = int.__lt__
_SCRIPT_SCHEMA = ScriptFunction.__dict__["schema"].__get__  # torch.jit.script's functions: their types are settable
_SCHEMA_ARGUMENTS = FunctionSchema.__dict__["arguments"].__get__
_ARGUMENT_NAME = Argument.__dict__["name"].__get__
_ARGUMENT_DEFAULT = Argument.__dict__["default_value"].__get__
_SCRIPT_CALL = ScriptFunction.__dict__["__call__"]  # what calling one runs; a replaced one calls with other defaults


def effective(obj, names) -> dict:
    """The default a caller who leaves each of ``names`` out gets from ``obj``, as ``[kind, text]``
    (kind: float, int, bool, str or object): through partials (their bound keywords), bound methods and
    wrappers (``__wrapped__``, as functools.wraps and torch.compile leave it; a wrapper that names the
    parameter with a default other than None decides) and torch.jit.script's functions (their schema). Read in the worker, on the learner's objects:
    nothing here calls the learner's code. Where the chain ends on an object none of those (a callable
    instance, a subclass of partial, a builtin), each name still pending is ``["unread", its type's name]``:
    what callers get there cannot be read, and the trusted side says so rather than passing it."""
    found: dict = {}
    pending = [n for n in names if isinstance(n, str)]
    for _ in range(64):
        if not pending:
            break
        kind = type(obj)
        if kind is _PARTIAL:
            bound = str_keyed(_PARTIAL_KEYWORDS(obj))
            for n in list(pending):
                if n in bound:
                    found[n] = _plain(bound[n])
                    pending.remove(n)
            obj = _PARTIAL_FUNC(obj)
        elif kind is _METHOD:
            obj = _METHOD_FUNC(obj)
        elif kind is staticmethod:
            obj = _STATIC_FUNC(obj)
        elif kind is _FUNCTION:
            code = _CODE(obj)
            positional = code.co_varnames[:code.co_argcount]
            defaults, kwdefaults = _DEFAULTS(obj), _KWDEFAULTS(obj)  # subclasses of tuple and dict are allowed:
            # read through tuple's and dict's own methods (a ``len`` or ``or`` would run the learner's). The defaults
            # fill the last positional parameters, as Python does also when an assigned tuple is longer.
            backwards = _TUPLE_GETITEM(defaults, _BACKWARDS) if defaults is not None else ()
            given = dict(zip(positional[::-1], backwards))
            if kwdefaults is not None:
                given.update(str_keyed(kwdefaults))
            for n in list(pending):
                if n in given and given[n] is not None:
                    found[n] = _plain(given[n])
                    pending.remove(n)
            obj = str_keyed(_FDICT(obj)).get("__wrapped__")
            if obj is None:
                break
        elif kind is ScriptFunction and str_keyed(_TYPE_DICT(kind)).get("__call__") is _SCRIPT_CALL:
            # torch.jit.script: its schema holds the defaults every call fills in (while calling it is torch's own)
            for arg in _SCHEMA_ARGUMENTS(_SCRIPT_SCHEMA(obj)):
                n, value = _ARGUMENT_NAME(arg), _ARGUMENT_DEFAULT(arg)
                if n in pending and value is not None:
                    found[n] = _plain(value)
                    pending.remove(n)
            break
        else:
            if obj is not None:
                for n in pending:
                    found[n] = ["unread", _safe_type_name(obj)]
            break
    return found


def str_keyed(d) -> dict:
    """The entries of a dict of the learner's whose keys are exact strs (a key of another type could run code
    when compared: its __eq__ and __hash__ are the learner's)."""
    if type(d) is _MAPPINGPROXY:  # a class's __dict__ (a real dict underneath)
        items = _PROXY_ITEMS(d)
    elif dict in _TYPE_MRO(type(d)):  # a dict subclass too (Python calls with its entries, not its methods)
        items = _DICT_ITEMS(d)
    else:
        return {}
    return {k: v for k, v in items if type(k) is str}


def static_attribute(cls, name: str):
    """``cls.name`` as the class body (or a base's) defined it, without running any descriptor or
    metaclass of the learner's."""
    try:
        for base in _TYPE_MRO(cls):
            attrs = str_keyed(_TYPE_DICT(base))  # a class body may hold a key of the learner's type too
            if name in attrs:
                return attrs[name]
    except Exception:  # noqa: BLE001 - not a class after all
        return None
    return None


def _plain(v) -> list:
    if v is None:
        return ["none", ""]
    if type(v) is bool:
        return ["bool", "True" if v else "False"]
    mro = _TYPE_MRO(type(v))  # not isinstance: a __class__ property could make it say float
    # by identity: `float in mro` compares with ==, which a metaclass of the learner's defines (and may raise)
    if any(c is float for c in mro):
        return ["float", _FLOAT_REPR(v)]
    if any(c is int for c in mro):
        if _INT_BITS(v) > 128:  # int.__repr__ raises past 4300 digits: that hid every default read
            return ["float", "-inf" if _INT_LT(v, 0) else "inf"]
        return ["int", _INT_REPR(v)[:40]]
    if type(v) is str:
        return ["str", v[:80]]
    return ["object", _safe_type_name(v)]


def _safe_type_name(v) -> str:
    try:
        name = type.__dict__["__qualname__"].__get__(type(v))
    except Exception:  # noqa: BLE001
        return "an object"
    return name[:60] if isinstance(name, str) else "an object"


def reported_problem(reported, entry, reference) -> str | None:
    """What is wrong with the defaults the worker found (``{label: {name: [kind, text]}}``, untrusted:
    anything malformed is ignored), or None."""
    if not isinstance(reported, dict):
        return None
    if isinstance(reported.get(UNREADABLE), str):
        return (f"the keyword defaults of `{entry.name}` cannot be read (reading them raised "
                f"{reported[UNREADABLE][:60]}), so callers' defaults cannot be checked: define `{entry.name}` "
                "once, as a plain `def` (or class) with the contract's defaults, and give its parameters plain "
                "default values")
    if entry.is_module:
        pairs = [(getattr(reference, "__init__", None), entry.init, f"{entry.name}.__init__"),
                 (getattr(reference, "forward", None), entry.params, f"{entry.name}.forward")]
    else:
        pairs = [(reference, entry.params, entry.name)]
    for ref, names, label in pairs:
        got = reported.get(label)
        if ref is None or not isinstance(got, dict):
            continue
        try:
            want = {n: p.default for n, p in inspect.signature(ref).parameters.items()
                    if p.default is not inspect.Parameter.empty}
        except (TypeError, ValueError):
            continue
        for name in names or ():
            value = got.get(name)
            if want.get(name) is None or not (isinstance(value, list) and len(value) == 2
                                              and all(isinstance(x, str) for x in value)):
                continue
            kind, text = value
            if kind == "unread":
                shown = "".join(c for c in text if c.isalnum() or c in "._")[:60] or "object"
                return (f"`{label}` is called through an object of type {shown!r} (not a function, a partial or "
                        f"a wrapper of one): the default callers get for `{name}` cannot be read, and the "
                        f"contract's is {want[name]!r}. Define `{label}` with a plain `def` and "
                        f"`{name}={want[name]!r}`.")
            said = _reported_value(kind, text[:100])
            if said is _UNREADABLE or said is None:
                continue
            if isinstance(said, _Object):
                shown = f"an object of type {said.name!r}"
            elif _same(said, want[name]):
                continue
            else:
                shown = repr(said)
            return (f"`{label}` gives `{name}` the default {shown} when it is called (whatever its `def` line "
                    f"reads), but the contract's default is {want[name]!r}: callers who leave `{name}` out "
                    f"expect that. Define `{label}` once, with `{name}={want[name]!r}`, and do not rebind it.")
    return None


UNREADABLE = "__unreadable__"  # the worker's key, with the exception's type name, when reading the defaults failed


class _Object:
    def __init__(self, name: str):
        self.name = name


_UNREADABLE = object()


def _reported_value(kind: str, text: str):
    try:
        if kind == "none":
            return None
        if kind == "bool":
            return {"True": True, "False": False}.get(text, _UNREADABLE)
        if kind == "float":
            return float(text)
        if kind == "int":
            return int(text) if len(text) <= 40 else _UNREADABLE
        if kind == "str":
            return text
        if kind == "object":
            return _Object("".join(c for c in text if c.isalnum() or c in "._")[:60] or "object")
    except ValueError:
        return _UNREADABLE
    return _UNREADABLE

"""Reflection refused at run time, in the worker: the ways from a string to the grader's objects that the source
scan (``hatches.scan_source``, which reads names) cannot see.

The guards run in the learner's process, so what they measure lives in Python objects there. The scan refuses the
names that reach them (``__globals__``, ``_getframe``, ``get_objects``, the mode stacks ...); built from strings at run
time (``getattr(f, "__glob" + "als__")``) the same names went through, and a submission reached a guard, emptied its
bans and reset its memory and work measures. Here, while the learner's code is on the stack:

- ``getattr``, ``setattr`` and ``delattr`` refuse the names the scan refuses, and ``vars()`` a class's or module's
  attribute dictionary (builtins replaced, process-wide);
- torch's functions that hand out the guards' modes (the mode stacks) or take them off refuse;
- an audit hook (which nothing can remove) refuses the garbage collector's object lists, frames (``sys._getframe``,
  a traceback's or generator's frame), code compiled under another file's name, new code or function objects, a
  function's ``__code__`` swapped, and Python's C API through ctypes.

Who asks decides: the learner's code anywhere on the stack (``_on_stack``) for what torch never needs while it runs
the learner's ops (the garbage collector's lists); for what Python and torch use themselves (attributes, frames,
compiling, the mode stacks: ``torch.jit.script`` reads a function's globals, ``torch.utils.checkpoint`` the dispatch
modes), the nearest caller outside the standard library (``_decider``).
This raises the bar; it is no proof. What a determined submission can still do is in docs/grading.md ("What the
in-process guards cannot promise"): the verdict on outputs and gradients is computed in the trusted process
whatever happens here.
"""

from __future__ import annotations

import builtins
import os
import sys
import sysconfig
import types

from torchcode.grader import hatches
from torchcode.grader.guards import _ACTIVE, _REPORT, ForbiddenCall
from torchcode.grader.hatches import ESCAPE_HATCHES

_FRAMES = "reaches into the grader's frames or memory"
_MODES = "hands out or removes the grader's guard modes"
# Names refused as a string too (getattr(x, name)): the scan's, and the ways to objects' insides the scan may not
# see as names (an attribute of a type's __dict__ is still looked up by getattr when built from a string)
REFUSED = {**ESCAPE_HATCHES, "__dict__": "reads a class's or module's attributes by names built at run time"}

# torch's functions that hand out the modes on its stacks, or take them off: (module, name), refused when the
# learner's code asks (torch asks for itself while it runs what the learner called: torch.utils.checkpoint and
# torch.compile look at the dispatch modes, its mode machinery pops them)
MODE_GETTERS = (("torch._C", "_get_dispatch_stack_at"), ("torch._C", "_get_function_stack_at"),
                ("torch._C", "_get_dispatch_mode"), ("torch.utils._python_dispatch", "_get_current_dispatch_mode"),
                ("torch.utils._python_dispatch", "_get_current_dispatch_mode_stack"),
                ("torch.overrides", "_get_current_function_mode"),
                ("torch.overrides", "_get_current_function_mode_stack"))
MODE_TAKERS = (("torch._C", "_pop_torch_dispatch_stack"), ("torch._C", "_pop_torch_function_stack"),
               ("torch._C", "_unset_dispatch_mode"), ("torch.utils._python_dispatch", "_pop_mode"),
               ("torch.utils._python_dispatch", "_pop_mode_temporarily"),
               ("torch.utils._python_dispatch", "_disable_current_modes"), ("torch.overrides", "_pop_mode"),
               ("torch.overrides", "_pop_mode_temporarily"))

_MADE = "makes code or functions by hand, which could pass for torch's (write plain Python functions)"
_WHY = {"gc.get_objects": "lists every object, the grader's included", "gc.get_referrers": "finds the grader's objects",
        "gc.get_referents": "finds the grader's objects", "code.__new__": _MADE, "function.__new__": _MADE,
        "marshal.loads": _MADE, "compile": "compiles code under another file's name, which could pass for torch's"}
# audit events: refused with the learner's code anywhere on the stack / asked for by it
ON_STACK_EVENTS = {"gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys._current_frames",
                   "sys._current_exceptions"}
DECIDED_EVENTS = {"sys._getframe", "code.__new__", "function.__new__", "marshal.loads"}  # (sys.setprofile is
# hatches.refuse_hooks's: the guards set their own profile hook at every op, and an event costs a call here)
FRAME_ATTRIBUTES = {"tb_frame", "gi_frame", "cr_frame", "ag_frame"}  # object.__getattr__: they hand out a frame
_WATCHED = frozenset({*ON_STACK_EVENTS, *DECIDED_EVENTS, "object.__getattr__", "object.__setattr__", "compile",
                      "ctypes.dlsym", "ctypes.dlsym/handle", "ctypes.dlopen"})

# The standard library's functions that hand a frame (or frames) back to their caller: looked through, so that
# the caller decides (inspect.stack() asked for by the learner is the learner's). (path under the stdlib, function)
HAND_FRAMES_BACK = {("inspect.py", "currentframe"), ("inspect.py", "stack"), ("inspect.py", "trace"),
                    ("inspect.py", "getouterframes"), ("inspect.py", "getinnerframes"),
                    ("traceback.py", "walk_stack"), ("traceback.py", "walk_tb"),
                    ("traceback.py", "_walk_tb_with_full_positions"), ("logging/__init__.py", "currentframe"),
                    ("logging/__init__.py", "<lambda>")}
# Functions of Python's frozen import machinery that call what they are handed (its frames otherwise decide for
# themselves: the compile of a module the learner's code imports is the import machinery's): looked through.
# `_bootstrap._call_with_frames_removed(getattr, module, name)` passed the refusals as the machinery's own call.
FROZEN_CALLERS = {"_call_with_frames_removed", "_requires_builtin_wrapper", "_requires_frozen_wrapper",
                  "_check_name_wrapper"}
# The standard library's functions that read what they ask for themselves (inspect.signature reads a function's
# globals for its annotations): (path under the stdlib, function)
CONSUMER_FUNCTIONS = {("inspect.py", "get_annotations")}
# The standard library's modules that read a frame for themselves and hand none back (paths under the stdlib folder)
CONSUMERS = {"typing.py", "collections/__init__.py", "enum.py", "traceback.py", "logging/__init__.py",
             "dataclasses.py", "warnings.py"}

_STDLIB: list[tuple[str, ...]] = [()]
_SITE: list[tuple[str, ...]] = [()]
_BOTTOM: list = [None]  # the code of the worker's own frame the learner's code runs above (Worker.serve)
_BUSY = [False]  # the audit hook is running (what it does itself raises events too)
_real_getattr, _real_setattr, _real_delattr = builtins.getattr, builtins.setattr, builtins.delattr
_real_vars = builtins.vars
_getframe = sys._getframe


def _trusted(file) -> bool:
    """Whether code of this file name is not the learner's (hatches.learners_code, as the guards' hook asks)."""
    return not hatches.learners_code(file)


def _stdlib(file: str) -> bool:
    return file.startswith(_STDLIB[0]) and not file.startswith(_SITE[0])


def _on_stack(frame) -> bool:
    """Whether any frame from here out, up to the worker's own, runs code that is not torch's, Python's or the
    grader's (the learner's, or a string the learner's code compiled)."""
    if _BOTTOM[0] is None:
        return False  # not armed (the zygote)
    while frame is not None and frame.f_code is not _BOTTOM[0]:
        if not _trusted(frame.f_code.co_filename):
            return True
        frame = frame.f_back
    return False


def _decider(frame) -> bool:
    """Whether the nearest caller outside the standard library is the learner's code. The standard library's
    frames are looked through (a function of theirs may call what it is handed and give back what that returned),
    except in the modules that use a frame for themselves (``CONSUMERS``: a namedtuple or TypeVar of the learner's
    names its module from the caller's frame); torch's and the grader's frames decide. Past a function that hands
    frames back (``HAND_FRAMES_BACK``), only its own module uses them for itself (traceback's extraction of the
    frames its walk_tb gives: print_exc): another module's function iterating them (``Counter(walk_stack(None))``)
    hands them on, and is looked through."""
    if _BOTTOM[0] is None:
        return False  # not armed (the zygote)
    handed_by = None  # the module of a function that hands frames back, passed on the way out
    while frame is not None and frame.f_code is not _BOTTOM[0]:
        code = frame.f_code
        file = code.co_filename
        if not _trusted(file):
            return True
        if file.startswith("<frozen ") and code.co_name in FROZEN_CALLERS:
            frame = frame.f_back  # (it calls what it is handed: its caller decides)
            continue
        if file.startswith("<frozen ") or not _stdlib(file):  # (Python's import machinery: a module compiled as
            return False  # the learner's code imports it)
        where = file[len(next(p for p in _STDLIB[0] if file.startswith(p))):]
        named = (where, code.co_name)
        if named in HAND_FRAMES_BACK:
            handed_by = handed_by or where
        elif named in CONSUMER_FUNCTIONS or where in CONSUMERS and handed_by in (None, where):
            return False
        frame = frame.f_back
    return False


def _refuse(what: str, why: str):
    what = f"{what} (it {why})"
    if _ACTIVE:
        _ACTIVE[-1].forbid(what)  # records, reports, raises
    _REPORT[0](forbidden=what)
    raise ForbiddenCall(f"{what} is forbidden")


def _name(name):
    """The exact text of an attribute name: what the real functions are then given, so that a str subclass's own
    __eq__ or __hash__ never finds another attribute than the one checked."""
    return name if type(name) is str else str.__str__(name) if isinstance(name, str) else name


# Objects whose insides a refused name reaches (a bound __getattribute__ of the learner's own object reads only that
# object: a dir() loop over one is fine)
_INSIDES = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType, types.CellType,
            types.CodeType, types.FrameType, types.TracebackType, types.MethodWrapperType, types.WrapperDescriptorType,
            types.MethodDescriptorType, types.GetSetDescriptorType, types.MemberDescriptorType)
_ON_INSIDES_ONLY = {"__getattribute__", "__dict__"}  # (functools.wraps reads a function's __dict__: not refused there)


def _refused(obj, n) -> bool:
    if type(n) is not str or n not in REFUSED:
        return False
    if n in _ON_INSIDES_ONLY:
        return isinstance(obj, _INSIDES) and not (n == "__dict__" and isinstance(obj, types.FunctionType))
    if n in ("__defaults__", "__kwdefaults__") and type(obj) is types.FunctionType:
        return _trusted(obj.__code__.co_filename)  # the learner's own function's may change (the defaults check
        # judges them); a wrapper of the grader's keeps what it wraps and how it refuses there
    return True


def getattr(obj, name, *default):  # noqa: A001 - replaces the builtin of that name
    if type(name) is str and name not in REFUSED:  # (the fast way: torch's own Python asks often)
        return _real_getattr(obj, name, *default)
    n = _name(name)
    if _refused(obj, n) and _decider(_getframe(1)):
        _refuse(f"getattr(..., {n!r})", REFUSED[n])
    return _real_getattr(obj, n, *default)


def setattr(obj, name, value):  # noqa: A001
    n = _name(name)
    if _refused(obj, n) and _decider(_getframe(1)):
        _refuse(f"setattr(..., {n!r}, ...)", REFUSED[n])
    return _real_setattr(obj, n, value)


def delattr(obj, name):  # noqa: A001
    n = _name(name)
    if _refused(obj, n) and _decider(_getframe(1)):
        _refuse(f"delattr(..., {n!r})", REFUSED[n])
    return _real_delattr(obj, n)


def vars(*args):  # noqa: A001
    """vars() of a class or a module: its attribute dictionary, where a name built at run time finds what getattr
    refuses (``vars(types.FunctionType)["__glob" + "als__"]``)."""
    if args and isinstance(args[0], (type, types.ModuleType)) and _decider(_getframe(1)):
        _refuse("vars() of a class or module", "reads its attributes by names built at run time")
    return _real_vars(*args) if args else _getframe(1).f_locals


def _audit(event: str, args) -> None:
    if event not in _WATCHED or _BUSY[0]:  # (every audited event comes here: builtins.id at each id())
        return
    if event == "object.__getattr__":
        if len(args) < 2 or args[1] not in FRAME_ATTRIBUTES:
            return
    elif event == "object.__setattr__":  # a function's code swapped: the grader's then runs the learner's
        if len(args) < 2 or args[1] != "__code__":
            return
    elif event == "compile":  # code named after a file that is not the learner's (or Python's own <frozen ...>):
        # its frames would pass for torch's
        if len(args) < 2 or type(args[1]) is not str or (
                args[1].startswith("<") and not args[1].startswith("<frozen")) or not _trusted(args[1]):
            return
    elif event == "ctypes.dlopen":  # a library the learner's code could have written (to the scratch folder): its
        # native code would run in this process, out of every guard's sight. Refused whoever asks (torch.ops.load_library)
        if args and hatches.learners_library(args[0]):
            _refuse(f"loading the native library {args[0]!s:.200}", "runs native code the grader cannot watch")
        return
    elif event in ("ctypes.dlsym", "ctypes.dlsym/handle"):  # Python's own C API (PyEval_GetFrame, ...) by ctypes
        if len(args) < 2 or not isinstance(args[1], str) or not args[1].startswith(("Py", "_Py")):
            return
    _BUSY[0] = True
    try:
        caller = _getframe(1)
        learners = _on_stack(caller) if event in ON_STACK_EVENTS else _decider(caller)
        del caller
    finally:
        _BUSY[0] = False
    if learners:
        if event == "object.__getattr__":
            _refuse(f"the {args[1]} attribute", "hands out a frame, and from there the grader's frames")
        if event == "object.__setattr__":
            _refuse("an assignment to a function's __code__", "makes a function run other code, the grader's too")
        if event.startswith("ctypes"):
            _refuse(f"ctypes for {args[1]}", "calls Python's C API, which reaches the grader's frames and objects")
        _refuse(event, _WHY.get(event, _FRAMES))


def _wrap(fn, label: str):
    def refusing(*args, **kwargs):
        if _decider(_getframe(1)):
            _refuse(label, _MODES)
        return fn(*args, **kwargs)

    refusing.__name__ = refusing.__qualname__ = _real_getattr(fn, "__name__", "refusing")
    refusing.__doc__ = _real_getattr(fn, "__doc__", None)
    return refusing


def _replace_everywhere(originals: dict) -> None:
    """Each original replaced by its wrapper in every loaded module that holds it (torch imports its functions under
    their names into several modules), the grader's own modules left alone."""
    for name, mod in list(sys.modules.items()):
        if mod is None or name == "torchcode" or name.startswith("torchcode."):
            continue
        try:
            space = _real_vars(mod)
        except TypeError:
            continue
        for key, value in list(space.items()):
            wrapper = originals.get(id(value))
            if wrapper is not None and wrapper[0] is value:
                space[key] = wrapper[1]


_INSTALLED = [False, False]  # (wrappers in place, armed)


def install() -> None:
    """Put the refusing wrappers in place of torch's mode-stack functions, in every
    module (once, in the zygote: its workers inherit them). They refuse nothing until ``refuse_reflection`` arms
    them in a worker."""
    if _INSTALLED[0]:
        return
    _INSTALLED[0] = True
    import importlib

    originals = {}
    for module, name in (*MODE_GETTERS, *MODE_TAKERS):
        try:
            fn = _real_getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            continue
        originals.setdefault(id(fn), (fn, _wrap(fn, f"{module}.{name}")))
    _replace_everywhere(originals)


def refuse_reflection(bottom) -> None:
    """Arm all of the above (worker only, after the guards' own set-up and ``hatches.set_learner_folders``, before
    the learner's file runs). ``bottom``: the code object of the worker's frame below which nothing is the learner's
    (a zygote started as ``python -c`` has a frame named ``<string>`` further down)."""
    install()
    if _INSTALLED[1]:
        return
    _INSTALLED[1] = True
    paths = sysconfig.get_paths()
    stdlib = {p for k in ("stdlib", "platstdlib") if (p := paths.get(k))}
    _STDLIB[0] = tuple({*(p.rstrip("/") + "/" for p in stdlib), *(os.path.realpath(p) + "/" for p in stdlib)})
    site = {p for k in ("purelib", "platlib") if (p := paths.get(k))}
    _SITE[0] = tuple({*(p.rstrip("/") + "/" for p in site), *(os.path.realpath(p) + "/" for p in site)})
    _BOTTOM[0] = bottom
    builtins.getattr, builtins.setattr, builtins.delattr, builtins.vars = getattr, setattr, delattr, vars
    sys.addaudithook(_audit)

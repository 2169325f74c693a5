"""Escape hatches: the ways learner code could switch the guards off or run unwatched, closed in the worker
before it runs.

- ``scan_source`` reads the submission's source (and ``watch_helper_imports`` that of every helper module it
  imports) for names that switch torch's modes off or reach into the grader (``ESCAPE_HATCHES``).
- ``watch_exports``, ``watch_registrations`` and ``refuse_hooks`` wrap the plain functions the guards' modes never
  see: taking tensor data out of torch, registering kernels for torch's operators, profile/trace hooks and signal
  handlers.
- ``keep_tensor_methods`` notes torch.Tensor's methods before the learner's file runs, so that the worker can tell
  when one was replaced (``tensor_methods_replaced``).
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import operator
import os
import sys

import torch

from torchcode.grader import guards
from torchcode.grader.guards import _ACTIVE, _LEAVING, _REPORT, EXPORT_FUNCTIONS, ForbiddenCall

# Names whose mere use in a submission means switching guards off or reading the grader.
_OFF = "switches off torch function modes (the grader's call guard)"
_POP = "removes or replaces the grader's guard modes"
_HANDS = "hands out the grader's guard modes"
_DISPATCH = "switches off torch dispatch modes (the grader's guards)"
_FRAMES = "reaches into the grader's frames or memory"
ESCAPE_HATCHES = {
    "DisableTorchFunction": _OFF,
    "DisableTorchFunctionSubclass": _OFF,
    "_disabled_torch_function_impl": "switches off torch function handling",
    "_DisableTorchDispatch": _DISPATCH,
    "_ExcludeDispatchKeyGuard": _DISPATCH,
    "_disable_current_modes": _DISPATCH,
    "_pop_mode": _POP,
    "_pop_mode_temporarily": _POP,
    "_pop_torch_function_stack": _POP,
    "_pop_torch_dispatch_stack": _POP,
    "_unset_dispatch_mode": _POP,
    "_set_torch_function_mode": _POP,
    # torch's override machinery runs the function it is handed inside the call guard's own handler, where that guard
    # is off: a function of the learner's (or torch's forbidden MHA forward) handed to it ran unwatched
    "handle_torch_function": "runs the function it is handed with the grader's call guard switched off (torch's "
                             "override boilerplate: call your function directly)",
    "_destroy": "removes the grader's kernel guards",
    "_getframe": _FRAMES,
    "currentframe": _FRAMES,
    "f_back": _FRAMES,
    "f_globals": _FRAMES,
    "f_locals": _FRAMES,
    "tb_frame": _FRAMES,
    "get_objects": _FRAMES,
    "get_referrers": _FRAMES,
    "get_referents": _FRAMES,
    "__closure__": _FRAMES,  # the grader's wrappers keep what they wrap in closures and keyword defaults
    "cell_contents": _FRAMES,
    "__kwdefaults__": _FRAMES,
    "__defaults__": _FRAMES,
    "__globals__": _FRAMES,
    "__wrapped__": _FRAMES,
    "setprofile": "runs code inside the grader's guards (a profile hook)",
    "settrace": "runs code inside the grader's guards (a trace hook)",
    "callbacks": "runs code inside the grader's guards (garbage-collector callbacks)",
    "torchcode": "reaches into the grader and its reference solutions",
    # what hands out the guards' modes, or an object's inside by a name given as text (reflection.py refuses the
    # same at run time)
    "_get_current_dispatch_mode": _HANDS, "_get_current_dispatch_mode_stack": _HANDS,
    "_get_current_function_mode": _HANDS, "_get_current_function_mode_stack": _HANDS,
    "_get_dispatch_stack_at": _HANDS, "_get_function_stack_at": _HANDS, "_get_dispatch_mode": _HANDS,
    "__subclasses__": _FRAMES, "__getattribute__": _FRAMES, "getclosurevars": _FRAMES, "getattr_static": _FRAMES,
    "getmembers_static": _FRAMES, "attrgetter": _FRAMES, "methodcaller": _FRAMES, "_current_frames": _FRAMES,
    "_current_exceptions": _FRAMES, "pythonapi": _FRAMES,
    "__code__": "swaps or reads a function's code (the grader's functions would run yours)",
}


# Modules a star import may not come from (what it brings in goes unnamed in the source)
STAR_REFUSED = {"operator", "_operator", "gc", "inspect", "ctypes", "_ctypes", "sys", "builtins", "types", "importlib",
                "traceback", "functools", "torch._C", "torch.overrides", "torch.utils._python_dispatch",
                "torch.library"}


# Names that are escape hatches only as an attribute or an import (``gc.callbacks``, ``from gc import callbacks``):
# a variable of that name is the learner's own.
ATTRIBUTES_ONLY = {"callbacks"}


class HelperHatch(ImportError):
    """A helper module beside the submission names an escape hatch (or is compiled, with no source to read)."""


def _site_packages() -> list[str]:
    """The site-packages folders, the user's too."""
    import site

    try:
        return [*site.getsitepackages(), site.getusersitepackages()]
    except (AttributeError, OSError):  # an old virtualenv's site module has neither
        return []


def _trusted_folders() -> list[str]:
    """Where the Python that may run inside the guards' handlers lies (the standard library, the installed packages,
    torch and the grader), each as given and as a real path."""
    import sysconfig

    import torchcode

    folders = [sysconfig.get_paths().get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")]
    folders += [*_site_packages(), os.path.dirname(torchcode.__file__), os.path.dirname(torch.__file__)]
    return sorted({os.path.realpath(f) for f in folders if f} | {f for f in folders if f})


def trust_installed_code() -> None:
    """Python that may run inside the guards' handlers (guards.set_trusted_code): what ``learners_code`` says is not
    the learner's (after ``set_learner_folders``)."""
    guards.set_trusted_code(learners_code)


def compile_without_fullgraph() -> None:
    """torch.compile(fullgraph=True) never compiles under the guards (torch.compile traces no frame while a
    dispatch mode not its own is on, and fullgraph turns that into an error: "found no compiled frames"), so correct
    code failed for the grader's sake. The worker drops ``fullgraph``: it only asks compile to refuse graph breaks,
    and changes no result."""
    real = torch.compile
    if getattr(real, "__torchcode_watched__", False):
        return

    def compile(*args, **kwargs):  # noqa: A001 - torch.compile's own name
        kwargs.pop("fullgraph", None)
        return real(*args, **kwargs)

    compile.__doc__, compile.__torchcode_watched__ = real.__doc__, True
    torch.compile = compile


def keep_thread_count() -> None:
    """The worker's threads were all started before confinement refused new ones; ``torch.set_num_threads(8)``, a
    line common in notebooks, made OpenMP start more at the next parallel op, and the process died there
    ("libgomp: Thread creation failed"). The worker keeps asking for at most the threads it has: the count is a
    speed setting and changes no result."""
    real = torch.set_num_threads
    if getattr(real, "__torchcode_watched__", False):
        return
    most = torch.get_num_threads()

    def set_num_threads(n, /):
        try:
            if operator.index(n) > most:  # an int, or what stands for one (a numpy integer)
                n = most
        except TypeError:
            pass  # torch's own error
        return real(n)

    set_num_threads.__doc__, set_num_threads.__torchcode_watched__ = real.__doc__, True
    torch.set_num_threads = torch._C.set_num_threads = set_num_threads


_LEARNERS: list = [(), (), (), ()]  # the learner's folders; the installed ones that do not hold them; every installed
# one (real paths); and every installed one also as named (a name under those is installed as written)
_KNOWN: dict = {}  # file name -> whether it is the learner's


def _under(path: str, tops) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in tops)


def _installed() -> set[str]:
    """Where Python, its packages, torch and the grader lie, as named and as real paths: what the worker may read,
    never write."""
    import torchcode

    places = [os.path.abspath(p) for p in (sys.prefix, sys.exec_prefix, sys.base_prefix) if p]
    return {*places, *(os.path.realpath(p) for p in places), *_trusted_folders()}  # (site-packages, torch, torchcode)


def set_learner_folders(folders: list[str]) -> None:
    """Where the learner's code lies (``learners_file``): its folders (the worker's scratch folder among them), less
    Python, its packages and the grader where they lie inside them (a project's .venv, a checkout of torchcode); but
    where a folder lies among the installed ones (a submission saved in site-packages), all of it is the learner's.
    And outside them, every file that is not installed: a module the learner's code wrote to its scratch folder (or
    /dev/shm) and imported from there is the learner's too."""
    roots = [os.path.realpath(f) for f in folders if f]
    named = _installed()
    installed = {os.path.realpath(p) for p in named}
    _LEARNERS[:] = [tuple(roots), tuple(p for p in installed if not any(_under(r, [p]) for r in roots)),
                    tuple(installed), tuple(named)]
    _KNOWN.clear()


def learners_file(path) -> bool:
    """Whether a file is the learner's: under ``set_learner_folders``'s folders and not installed there, or installed
    nowhere (nothing is, before they are set). A relative name is: it means another file once the learner's code
    changes the working directory. A file found not to be the learner's is remembered only where its name lies among
    the installed folders as written, which the worker cannot change (a link elsewhere, in the scratch folder, may be
    replaced by a file of the learner's)."""
    if not _LEARNERS[2]:
        return False
    key = str(path)
    known = _KNOWN.get(key)
    if known is None:
        if not key.startswith("/"):
            known = True
        else:
            real = os.path.realpath(key)
            known = not _under(real, _LEARNERS[1] if _under(real, _LEARNERS[0]) else _LEARNERS[2])
        written = os.path.normpath(key)
        if known or _under(written, _LEARNERS[3]):  # (installed folders are read-only to the worker: a link there
            _KNOWN[key] = known  # stays what it is)
    return known


def learners_library(name) -> bool:
    """Whether a native library (a name given to dlopen, or an extension module's file) is one the learner could have
    written: in the learner's folders or the scratch folder (less installed folders there), in /dev/shm, or named by a
    relative path. A bare name is searched only where the worker cannot write; a system library's absolute path is
    no learner's (CUDA's, the driver's lie outside Python's folders)."""
    if type(name) is not str or "/" not in name:
        return type(name) is not str and name is not None
    if not name.startswith("/"):
        return True
    real = os.path.realpath(name)
    return _under(real, _LEARNERS[0]) and not _under(real, _LEARNERS[1]) or _under(real, ["/dev/shm"])


def learners_code(file) -> bool:
    """Whether code of this file name (a code object's ``co_filename``) is the learner's: a learner's file, code
    compiled from a string (``<string>``; not Python's own ``<frozen ...>``), or a name that is not an exact str (its
    methods would be the learner's Python). The one definition the guards' hook and the reflection layer share."""
    if type(file) is not str:
        return True
    if file.startswith("<"):
        return not file.startswith("<frozen ")
    return learners_file(file)


def watch_helper_imports() -> None:
    """Scan the source of every module of the learner's (``learners_file``: helpers beside the file, or one its code
    wrote to the scratch folder) as it is imported, as the main file is scanned, before it runs: the scan of the main
    file alone let a helper module switch the guards off. A module compiled without its source (a bare .pyc) or
    imported from a zip archive there is refused."""
    import importlib.util
    import zipimport
    from importlib import _bootstrap_external as be

    mine = learners_file  # (set_learner_folders first)

    source_code, sourceless_code = be.SourceLoader.get_code, be.SourcelessFileLoader.get_code

    def get_code(self, fullname):
        path = self.get_filename(fullname)
        if not mine(path):
            return source_code(self, fullname)
        name, data = os.path.basename(str(path)), self.get_data(path)
        try:
            hatches = scan_source(importlib.util.decode_source(data))
        except (SyntaxError, ValueError, UnicodeDecodeError, LookupError, RecursionError, MemoryError):
            hatches = []  # compiling it says what is wrong with it
        if hatches:
            hatch, line, why = hatches[0]
            raise HelperHatch(f"{name} line {line} uses `{hatch}`, which {why}; submissions (and the modules "
                              "they import) may not do that")
        # compiled from the source just scanned, never from __pycache__: a cached .pyc whose header matches the
        # source's size and time can hold any other code
        return compile(data, str(path), "exec", dont_inherit=True)

    def get_sourceless_code(self, fullname):
        path = self.get_filename(fullname)
        if mine(path):
            raise HelperHatch(f"{os.path.basename(str(path))} is compiled Python without its source: import your "
                              "helper modules as .py files")
        return sourceless_code(self, fullname)

    def from_zip(method):
        def refuse(self, fullname):
            if mine(self.archive):
                raise HelperHatch(f"{os.path.basename(self.archive)} is a zip archive: import your helper modules "
                                  "as .py files beside your file")
            return method(self, fullname)
        return refuse

    import _imp
    from importlib.machinery import ModuleSpec

    create_dynamic = _imp.create_dynamic

    def create_dynamic_checked(spec, *args):  # what every loader of an extension module ends in (it loads
        # spec.origin, whatever the loader's own path says); called with a spec of exact strings read once, so that
        # a property of the learner's cannot name one file to this check and another to the loader
        name, origin = getattr(spec, "name", None), getattr(spec, "origin", None)
        if type(name) is not str or type(origin) is not str or learners_library(origin):
            raise HelperHatch(f"{os.path.basename(str(origin))} is a compiled extension module: submissions and "
                              "their helpers are Python source")
        return create_dynamic(ModuleSpec(name, None, origin=origin), *args)

    be.SourceLoader.get_code = get_code
    be.SourcelessFileLoader.get_code = get_sourceless_code
    _imp.create_dynamic = create_dynamic_checked
    zipimport.zipimporter.get_code = from_zip(zipimport.zipimporter.get_code)  # exec_module calls it
    zipimport.zipimporter.load_module = from_zip(zipimport.zipimporter.load_module)


def scan_source(source: str) -> list[tuple[str, int, str]]:
    """Escape hatches named in the source: (name, line, why). Needs parseable source."""
    found = []
    for node in ast.walk(ast.parse(source)):
        names = []
        if isinstance(node, ast.Name):
            names = [node.id] if node.id not in ATTRIBUTES_ONLY else []
        elif isinstance(node, ast.Attribute):
            names = [node.attr]
        elif isinstance(node, ast.ImportFrom) and node.module in STAR_REFUSED and any(a.name == "*" for a in node.names):
            found.append((f"from {node.module} import *", node.lineno, "brings in names the scan cannot read "
                          "(operator's attrgetter reads any attribute by a name built at run time)"))
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            mods = [a.name for a in node.names] + ([node.module] if isinstance(node, ast.ImportFrom) and node.module else [])
            names = [m.split(".")[0] for m in mods] + [a.name for a in node.names]
        for n in names:
            if n in ESCAPE_HATCHES:
                found.append((n, getattr(node, "lineno", 0), ESCAPE_HATCHES[n]))
    return found


# torch's own Tensor methods as the worker found them, before the learner's file ran: the worker reads results
# through them (encoding a reply calls detach, contiguous, numpy) after the guard has exited, so a method replaced by
# the learner's code would run there, unmeasured (the real forward computed while the reply is encoded).
_TENSOR_METHODS: list = []


def keep_tensor_methods() -> None:
    """Note what torch.Tensor and its C base hold now (worker only: once, after torch's preloads and before any of
    the learner's code runs)."""
    _TENSOR_METHODS[:] = [(cls, dict(vars(cls))) for cls in (torch.Tensor, torch._C.TensorBase)]


def tensor_methods_replaced() -> str:
    """The first attribute of torch.Tensor (or its C base) set, replaced or removed since keep_tensor_methods ('' if
    none)."""
    for cls, kept in _TENSOR_METHODS:
        now = vars(cls)
        for name in sorted(now.keys() ^ kept.keys()):
            if name not in _PYTHON_SETS:
                return f"{cls.__name__}.{name}"
        for name, value in kept.items():
            if name not in _PYTHON_SETS and now.get(name) is not value:
                return f"{cls.__name__}.{name}"
    return ""


# What Python itself caches on a class: copyreg notes __slotnames__ the first time one is pickled (torch.save)
_PYTHON_SETS = frozenset({"__slotnames__"})


def watch_exports() -> None:
    """Wrap EXPORT_FUNCTIONS (worker only): inside a measuring guard, calling one is a forbidden call."""
    for module, name in EXPORT_FUNCTIONS:
        try:
            mod = importlib.import_module(module)
            fn = getattr(mod, name)
        except (ImportError, AttributeError):
            continue
        if getattr(fn, "__torchcode_watched__", False):
            continue

        def watched(*args, __fn=fn, __name=f"{module}.{name}", **kwargs):
            if _ACTIVE and _ACTIVE[-1].measured:
                _ACTIVE[-1].forbid(f"{__name} ({_LEAVING})")
            return __fn(*args, **kwargs)

        watched.__torchcode_watched__ = True
        setattr(mod, name, watched)


_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_REGISTERING = (os.path.join(_TORCH_DIR, "library.py"), os.path.join(_TORCH_DIR, "_library") + os.sep,
                os.path.join(_TORCH_DIR, "_ops.py"), contextlib.__file__)


def watch_registrations() -> None:
    """Wrap torch's kernel registration (worker only, after ``ban_kernels``): a kernel of the learner's own for one
    of torch's operators (``torch.library.Library("aten", "IMPL")``, ``torch.library.impl``) is a forbidden call.
    Such a kernel runs while the guards' modes are off the stack: nothing it computes is measured. Operators in
    a namespace of the learner's own stay allowed (where a case measures, running one is refused)."""
    C = torch._C
    real = getattr(C, "_dispatch_library", None)
    if real is None or getattr(real, "__torchcode_watched__", False):
        return
    taken = {op.split("::")[0] for op in C._dispatch_get_all_op_names()}

    def watched(kind, ns, *args, **kwargs):
        if ns in taken and kind != "DEF" and not _from_torch(sys._getframe(1)):
            name = f"torch.library.Library({ns!r}, {kind!r}) (a kernel of your own for torch's operators)"
            if _ACTIVE:
                _ACTIVE[-1].forbid(name)
            _REPORT[0](forbidden=name)
            raise ForbiddenCall(f"{name} is forbidden")
        return real(kind, ns, *args, **kwargs)

    watched.__torchcode_watched__ = True
    C._dispatch_library = watched


# Ways to run Python at any moment, the guards' own handlers included (which run with the guard modes off the
# stack, where nothing is measured or refused): a profile or trace hook runs at every call, a signal handler
# between any two bytecodes. Submissions never need them: the worker replaces them with functions that refuse
# a Python callable (ignoring a signal, or None, stays allowed). (module, function, index of the callable)
HOOKS = (("sys", "setprofile", 0), ("sys", "settrace", 0), ("signal", "signal", 1), ("_signal", "signal", 1),
         ("threading", "setprofile", 0), ("threading", "settrace", 0))


def refuse_hooks() -> None:
    """Wrap HOOKS (worker only, after its own signal handlers are set): installing a Python callable through one
    is a forbidden call."""
    for module, name, at in HOOKS:
        mod = sys.modules.get(module) or importlib.import_module(module)
        fn = getattr(mod, name, None)
        if fn is None or getattr(fn, "__torchcode_watched__", False):
            continue

        def refusing(*args, __fn=fn, __at=at, __name=f"{module.lstrip('_')}.{name}"):
            # a callable, or any change of the profile or trace hook during a call (the grader's own is on then)
            if len(args) > __at and callable(args[__at]) or _ACTIVE and "signal" not in __name:
                why = f"{__name} (a hook or signal handler runs inside the grader's guards, where they cannot see it)"
                if _ACTIVE:
                    _ACTIVE[-1].forbid(why)
                _REPORT[0](forbidden=why)
                raise ForbiddenCall(f"{why} is forbidden")
            return __fn(*args)

        refusing.__torchcode_watched__ = True
        setattr(mod, name, refusing)


def _from_torch(frame) -> bool:
    """Whether the registration was asked for by torch's own code (a lazy import), not by the learner's."""
    while frame is not None and frame.f_code.co_filename.startswith(_REGISTERING):
        frame = frame.f_back
    return frame is not None and frame.f_code.co_filename.startswith(_TORCH_DIR)

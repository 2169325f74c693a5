"""The sandboxed side: loads the learner's file and runs case programs on it.

This runs in a forked child in its own session, with resource limits, stdout and
stderr sent to a file, and no knowledge of the seed or of any expected value. It
only ever *reports* (outputs, gradients, errors, guard findings); every judgement is
made by the trusted process from those reports.
"""

from __future__ import annotations

import builtins
import errno
import importlib
import importlib.machinery
import importlib.util
import inspect
import keyword
import os
import socket
import sys
import time
import traceback
import types

import torch

from torchcode.grader import defaults, execute, guards, hatches, portable, reflection, startup
from torchcode.grader import protocol
from torchcode.grader.protocol import Message, decode, receive

MAX_TRACEBACK = 4000
_MODULE_DICT = torch.nn.Module.__dict__["__dict__"].__get__  # an instance's own attributes, whatever its class says
_MODULE_FORWARD = torch.nn.Module.__dict__["forward"]  # nn.Module's placeholder: a class that defines no forward


START_FAILED = 70  # exit status of a worker that could not start: never the submission's doing


def main(sock_fd: int, config: dict) -> None:
    """Entry point of the forked worker; never returns.

    Its first message, before any learner code runs, says whether it started: "ready", or
    "start_failed" with the cause (then it exits with START_FAILED). The trusted side turns a
    failed start into a GraderError, never into a verdict.
    """
    code = 0
    try:
        sock = socket.socket(fileno=sock_fd)
        try:
            confined = startup.start(config, sock_fd)
        except startup.StartFailure as e:
            code = START_FAILED
            Message().send(sock, {"op": "start_failed", "message": str(e)[:2000]})
            return
        protocol.note(sock, ready={"confined": confined})  # before any learner code: cannot be forged
        w = Worker(sock, int(config.get("output_bytes") or 0), startup.import_folders(config))
        w.cuda = config.get("device") == "cuda" or bool(config.get("device_init"))  # (tests simulate CUDA with one)
        w.serve()
    except BaseException:  # noqa: BLE001 - nothing may escape the child
        pass
    finally:
        os._exit(code)


def _not_utf8(raw: bytes, e: Exception) -> str:
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "your file is UTF-16 text (as Windows PowerShell's `>` writes it): save it as UTF-8"
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as u:
        line = raw[:u.start].count(b"\n") + 1
        return (f"your file is not UTF-8 text (byte 0x{raw[u.start]:02x} on line {line}): save it as UTF-8 "
                f"(or declare its encoding on line 1, e.g. `# -*- coding: latin-1 -*-`)")
    return f"your file's encoding cannot be read ({e}): save it as UTF-8"


# CUDA's words for a kernel that read or wrote out of bounds (an index out of range, on the CPU an IndexError)
_CUDA_INDEX_ERRORS = ("device-side assert triggered", "an illegal memory access was encountered")


def _cuda_error(e: BaseException, stage: str, tb: str = "") -> dict | None:
    """A CUDA error's runtime error, in the learner's terms (None: not one). After one, the device stays unusable."""
    if not isinstance(e, RuntimeError):  # torch.AcceleratorError (torch 2.8+) is a RuntimeError
        return None
    try:
        text = str.__str__(str(e))  # an exact str: a subclass's methods (__contains__...) are the learner's code
    except BaseException:  # noqa: BLE001 - a learner's RuntimeError subclass whose __str__ raises
        return None
    first = text.splitlines()[0][:160] if text else ""
    if any(s in text for s in _CUDA_INDEX_ERRORS):
        return {"kind": "runtime", "stage": stage, "traceback": tb, "message": (
            f"RuntimeError {stage}: {first}. On a GPU this is most often an index out of "
            "range (indexing, gather, scatter, an embedding with a position past the table): the GPU reports it "
            "late and without the line. `--device cpu` runs the same code on the CPU, where it raises an "
            "IndexError at the line that indexes.")}
    if text.startswith("CUDA error"):
        return {"kind": "runtime", "stage": stage, "traceback": tb, "message": (
            f"RuntimeError {stage}: {first}. The GPU reports such errors late and without the line: "
            "`--device cpu` runs the same code on the CPU, where it fails at the line that causes it.")}
    return None


_T = protocol._T  # torch's own Tensor functions, taken before any submission ran
_TENSOR_NAMES = frozenset(dir(torch.Tensor))


def _replaced(name: str, stage: str) -> dict:
    return {"kind": "forbidden", "names": [], "stage": stage,
            "message": f"your code changed torch's {name} {stage}: torch's own tensor methods must stay as torch "
                       "defines them (the grader reads your results through them). Write a function of your own "
                       "instead of changing torch.Tensor"}


_UNREADABLE = ("what your code returned raised an error when the grader read it ({e}): return plain torch.Tensor "
               "objects in tuples, with no attributes or methods of your own")


def _is_form(f, depth: int = 0) -> bool:
    """A form as execute.form() makes them (the trusted side's header: checked all the same)."""
    if f is None or f in ("T", "X"):
        return True
    return isinstance(f, list) and depth < 8 and all(_is_form(x, depth + 1) for x in f)


def _shadowed(ex: execute.Execution) -> str:
    """A tensor returned (or a gradient) that carries its own attribute named as one of torch.Tensor's
    (``out.detach = ...``): '' if none."""
    found = [t for o in ex.outputs for t in execute.flatten(o).values() if isinstance(t, torch.Tensor)]
    found += [g for g in (*ex.input_grads.values(), *ex.param_grads.values()) if isinstance(g, torch.Tensor)]
    for t in found:
        own = getattr(t, "__dict__", None)  # a tensor's instance attributes (a data descriptor: not shadowable)
        for name in (own if isinstance(own, dict) else {}):
            if isinstance(name, str) and name in _TENSOR_NAMES:
                return f"Tensor.{name} (set on a tensor your code returned)"
    return ""


def _too_big(ex: execute.Execution, limit) -> str:
    """Why the results are more than the case can legitimately return ('' if they are not)."""
    if not isinstance(limit, dict):
        return ""
    found = [t for o in ex.outputs for t in execute.flatten(o).values() if isinstance(t, torch.Tensor)]
    found += [g for g in (*ex.input_grads.values(), *ex.param_grads.values()) if isinstance(g, torch.Tensor)]
    nbytes = sum(_T.numel(t) * _T.element_size(t) for t in found)  # torch's, not a method the tensor carries
    if len(found) > int(limit.get("tensors", 0)) or nbytes > int(limit.get("bytes", 0)):
        shapes = ", ".join(str(list(t.shape)) for t in found[:4]) + (", ..." if len(found) > 4 else "")
        return (f"your code returned {len(found)} tensors of {nbytes / 2**20:.1f} MB in all (shapes {shapes}), far "
                "more than this case's outputs: check the shape of what you return")
    return ""


def _hide_grader_modules() -> None:
    """Take torchcode's modules out of sys.modules before the learner's code runs: the worker keeps
    using them, but ``sys.modules["torchcode..."]`` finds nothing, and importing them again means
    reading files that confinement keeps out of reach."""
    for name in [n for n in sys.modules if n == "torchcode" or n.startswith("torchcode.")]:
        del sys.modules[name]


def _module_name(path: str) -> str:
    """The name `import` gives the learner's file (``gqa.py`` is ``gqa``), where that name is free: not a module
    loaded or installed (``json.py`` would shadow the library's for torch too). Else "submission"."""
    stem = os.path.basename(path).rpartition(".")[0] or os.path.basename(path)
    if not stem.isidentifier() or keyword.iskeyword(stem) or stem in sys.modules:
        return "submission"
    try:
        found = importlib.machinery.PathFinder.find_spec(stem, sys.path)  # (the learner's folders not yet on it)
    except (ImportError, ValueError, OSError):
        return "submission"
    return "submission" if found is not None else stem


def _module_for(path: str) -> types.ModuleType:
    """The learner's module, not yet run: __name__, __spec__, __loader__, __file__ and __cached__ as `import` sets
    them (a file of any name: `check notes.txt` too)."""
    name = _module_name(path)
    return importlib.util.module_from_spec(importlib.util.spec_from_file_location(
        name, path, loader=importlib.machinery.SourceFileLoader(name, path)))


# Modules the command line interface imported (the zygote of `check` is forked from it), with those they imported,
# which a plain `python` that imported torch has not: `"typer" in sys.modules` told a file it was graded, and so did
# `"colorsys" in sys.modules` (rich's). Top-level names; `_sysconfigdata` a prefix.
CLI_MODULES = ("typer", "click", "rich", "shellingham", "annotated_doc", "markdown_it", "mdurl", "pygments", "sqlite3",
               "_sqlite3", "colorsys", "hmac", "secrets", "shlex", "resource", "sysconfig", "_sysconfigdata")


def _as_if_imported() -> None:
    """Leave out what would name the grader to the learner's file (each read by a submission that was right only
    when graded, docs/grading.md "What a submission can tell"): the grader's command line (`torchcode check FILE
    --seed N`: sys.argv, sys.orig_argv, __main__'s file), variables (TORCHCODE_HOME, the shell's `_`), modules and
    exception hook, and its script's folder on sys.path. Its file is imported as an interactive session imports it
    (the process's name and command line: sandbox._as_plain_python)."""
    sys.argv[:] = [""]
    sys.orig_argv = [os.path.basename(sys.executable)]
    for var in [v for v in os.environ if v == "_" or v.startswith("TORCHCODE_")]:
        del os.environ[var]
    for name in [n for n in sys.modules if n.partition(".")[0] in CLI_MODULES or n.startswith("_sysconfigdata")]:
        del sys.modules[name]
    main = types.ModuleType("__main__")  # an interactive session's
    main.__builtins__, main.__loader__, main.__annotations__ = builtins, importlib.machinery.BuiltinImporter, {}
    sys.modules["__main__"] = main
    sys.excepthook = sys.__excepthook__
    scripts = os.path.dirname(sys.executable)  # where `torchcode` is installed, beside the interpreter
    sys.path[:] = [p for p in sys.path if not (isinstance(p, str) and p and os.path.abspath(p) == scripts)]


# Modules torch imports on the first use of a feature: seconds of one-time loading. Imported while
# loading a file that names such a feature, so its first case does not wait for them (the judge also
# forgives one-time costs, but only up to twice a case's limit).
# torch.autograd.grad and .backward(gradient) given a tensor import symbolic_shapes (and sympy, 0.3-0.7 s; over a
# second under load): a custom autograd Function's backward that calls them paid it in its first case.
LAZY_IMPORTS = {"torch._dynamo": ("checkpoint", "torch.compile", "_dynamo", "torch.func", "functorch", "func import"),
                "torch.fx.experimental.symbolic_shapes": ("backward", "autograd.grad")}


# torch's own tensor subclasses a learner builds with their constructor (guards.buildable), by the words naming them
TORCH_SUBCLASSES = ("CausalBias", "causal_lower_right", "causal_upper_left", "attention.bias")

_TOO_DEEP = ("your file nests an expression too deeply for Python to compile it (hundreds of brackets, operators "
             "or calls inside one another): write it as several statements")


def _preload(source: str) -> None:
    for module, words in LAZY_IMPORTS.items():
        if module not in sys.modules and any(w in source for w in words):
            try:
                importlib.import_module(module)
            except Exception:  # noqa: BLE001 - then the learner's call imports it, or fails, itself
                pass
    if "torch._dynamo" in sys.modules:
        guards.keep_out_of_compilation()
    if any(w in source for w in TORCH_SUBCLASSES):
        try:
            from torch.nn.attention import bias
        except ImportError:
            return
        guards.buildable(bias.CausalBias)


_GRADER_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _learner_traceback(exc: BaseException, path: str) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    mine = [f for f in frames if f.filename == path]
    # none of the file's own (a call that did not match its signature, an error in a helper module): the innermost
    # frame that is not the grader's (the grader's own line means nothing to the learner)
    theirs = mine or [f for f in frames if not f.filename.startswith(_GRADER_DIR)][-1:]
    text = "".join(traceback.format_list(theirs) + traceback.format_exception_only(type(exc), exc))
    return text[-MAX_TRACEBACK:]


def _signature_problem(fn, expected: tuple[str, ...], n_pos: int, label: str, skip_self: bool) -> str | None:
    """Can ``fn`` be called the way the grader (and real callers) call it?

    The first ``n_pos`` contract parameters are passed by position: any names will do. The rest are
    optional and passed by keyword: those names (and their order, for callers passing them by
    position) are the contract, and each needs a default. Extra parameters need defaults too."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    params = list(sig.parameters.values())[1 if skip_self else 0:]
    n_pos = max(0, min(n_pos, len(expected)))
    named = [p for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    var_pos = any(p.kind is p.VAR_POSITIONAL for p in params)
    var_kw = any(p.kind is p.VAR_KEYWORD for p in params)
    lead = next((i for i, p in enumerate(named) if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)),
                len(named))  # parameters that can be passed by position
    if lead < n_pos and not var_pos:
        return _sig_msg(label, expected, n_pos, sig)
    tail, want = named[min(lead, n_pos):], list(expected[n_pos:])
    if [p.name for p in tail[:len(want)]] != want[:len(tail)] or (len(tail) < len(want) and not var_kw):
        return _sig_msg(label, expected, n_pos, sig)
    for k, p in enumerate(tail[:len(want)]):
        if p.kind is p.POSITIONAL_ONLY:
            return f"`{label}` must accept `{p.name}` by keyword (callers write {p.name}=...): remove the `/`"
        if p.kind is p.KEYWORD_ONLY:  # the contract's signature lets a caller pass it by position too
            before = ", ".join([*expected[:n_pos], *want[:k]])
            return (f"`{label}` must accept `{p.name}` by position too: the contract is "
                    f"({_contract(expected, n_pos)}), so callers may write ({before}, {p.name}) without `{p.name}=`; "
                    f"yours makes it keyword-only (after `*` or `*args`, or bound by keyword in a functools.partial): "
                    f"move `{p.name}` before them")
        if p.default is p.empty:
            return (f"`{label}`: `{p.name}` must be optional, as in the contract ({_contract(expected, n_pos)}): "
                    "callers leave it out; give it a default")
    if len(tail) < len(want) and not var_pos:  # the rest reach it only through **kwargs: not by position
        name = want[len(tail)]
        return (f"`{label}` must accept `{name}` by position too: the contract is ({_contract(expected, n_pos)}), so "
                f"callers may pass it without `{name}=`; yours takes it only by keyword, through `**`: name it "
                f"`{name}=...` in the signature")
    for p in tail[len(want):]:
        if p.default is p.empty:
            return f"`{label}` has an extra required parameter `{p.name}`: give it a default or remove it"
    return None


def _contract(expected, n_pos) -> str:
    return ", ".join(list(expected[:n_pos]) + [f"{n}=..." for n in expected[n_pos:]])


def _sig_msg(label, expected, n_pos, sig) -> str:
    free = (f"; the names of the first {n_pos} are yours to choose" if n_pos > 1 else
            "; the name of the first is yours to choose" if n_pos == 1 else "")
    kw = ", the others are passed by keyword with exactly these names" if n_pos < len(expected) else ""
    return f"`{label}` must take ({_contract(expected, n_pos)}){free}{kw}; yours is {label}{sig}"


_UNSENDABLE_GRAD = ("a gradient your code produced cannot be graded: {e}. Each gradient must be an ordinary dense "
                    "tensor like its input (a custom autograd.Function's backward returns one per input: not sparse, "
                    "not a tensor subclass)")
_LAYOUT = torch._C.TensorBase.__dict__["layout"].__get__


def _encode_grad(g, msg: Message):
    """A gradient on the wire: None, or an ordinary strided tensor (anything else raises, with the reason)."""
    if g is None:
        return None
    if type(g) is not torch.Tensor and type(g) is not torch.nn.Parameter:
        raise TypeError(f"it is a {_type_name(type(g))}, not a torch.Tensor")
    layout = _LAYOUT(g)
    if layout != torch.strided:
        raise TypeError(f"it is a {str(layout).removeprefix('torch.')} tensor (e.g. from .to_sparse())")
    return msg.tensor(g)


def _safe_text(e: BaseException) -> str:
    try:
        return str.__str__(str(e))  # an exact str: a subclass's methods (__getitem__...) are the learner's code
    except BaseException:  # noqa: BLE001
        return _type_name(type(e))


def _type_name(t: type) -> str:
    """A class's name as Python defined it: a metaclass cannot make it raise or lie (a property named
    ``__name__`` on the metaclass is not consulted)."""
    try:
        module, name = type.__dict__["__module__"].__get__(t), type.__dict__["__qualname__"].__get__(t)
    except BaseException:  # noqa: BLE001
        return "an object"
    module = module if isinstance(module, str) else "?"
    return name if module == "builtins" else f"{module}.{name}"


def _count(spec: dict, key: str, names: tuple) -> int:
    n = spec.get(key)
    return n if isinstance(n, int) and 0 <= n <= len(names) else len(names)


class Worker:
    def __init__(self, sock: socket.socket, output_limit: int = 0, folders: list[str] | None = None):
        self.sock = sock
        self.folders = folders or []  # on sys.path for the learner's imports (see startup.import_folders)
        self.output_limit = output_limit
        self.entry = None
        self.spec: dict = {}
        self.path = ""
        self.forbidden: list = []
        self.benched = (None, "cpu")  # (what bench_call calls, its device): set by bench_setup
        self.defaults: dict = {}  # the entry's keyword defaults when the file was loaded (defaults.effective)
        self.cuda = False  # on a GPU, where a CUDA error can surface outside the learner's call

    def serve(self) -> None:
        while True:
            header, tensors = receive(self.sock)
            op = header.get("op")
            msg = Message()
            try:
                if op == "load":
                    body = self.load(header)
                elif op == "case":
                    body = self.case(header, tensors, msg)
                elif op == "portable":
                    body = self.portable(header, tensors)
                elif op in ("bench_setup", "bench_call", "bench_echo"):
                    body = getattr(self, op)(header, tensors, msg)
                else:
                    return
            except BaseException as e:
                # A CUDA error past the handlers': after a device-side assert in the learner's kernel, every later
                # use of the device raises (moving the next inputs there, reading an output). Said as the learner's
                # error: a worker that ended without a word was "Crashed ... exited with code 0" on an H100.
                stage = "while your file loaded" if op == "load" else "in this case"
                body = _cuda_error(e, stage, _learner_traceback(e, self.path)) if self.cuda else None
                if body is None:
                    raise
                msg = Message()
                body = {"error": body}
            msg.send(self.sock, body)

    # -- loading the learner's file ------------------------------------------------------
    def load(self, h: dict) -> dict:
        self.path, self.spec, self.forbidden = h["path"], h["entry"], h["forbidden"]
        start = time.perf_counter()
        try:
            with open(self.path, "rb") as f:
                raw = f.read()
        except OSError as e:
            return {"error": {"kind": "runtime", "message": f"cannot read your file: {e}"}}
        try:  # as Python reads a file: a UTF-8 BOM (Windows editors) or a `# -*- coding: ... -*-` line honoured
            source = importlib.util.decode_source(raw)
        except (SyntaxError, UnicodeDecodeError, LookupError) as e:
            return {"error": {"kind": "syntax", "message": _not_utf8(raw, e)}}
        self.source = source
        if "\0" in source:  # compile() says "source code string cannot contain null bytes" at None:None
            line = source.count("\n", 0, source.index("\0")) + 1
            return {"error": {"kind": "syntax", "message": f"your file contains a NUL byte (line {line}): it is not "
                              "plain text. Remove it, or save the file again as UTF-8 text"}}
        try:
            code = compile(source, self.path, "exec")
        except SyntaxError as e:
            where = f"{e.filename}:{e.lineno}" + (f":{e.offset}" if e.offset else "")
            text = (e.text or "").rstrip("\n")
            caret = (" " * max((e.offset or 1) - 1, 0) + "^") if e.text else ""
            return {"error": {"kind": "syntax", "message": f"{where}: {e.msg}", "traceback": f"{text}\n{caret}".strip("\n")}}
        except ValueError as e:  # e.g. null bytes
            return {"error": {"kind": "syntax", "message": str(e)}}
        except (RecursionError, MemoryError):  # what Python's own parser raises for an expression nested too deep
            return {"error": {"kind": "syntax", "message": _TOO_DEEP}}
        try:
            found = hatches.scan_source(source)
        except (RecursionError, MemoryError):
            return {"error": {"kind": "syntax", "message": _TOO_DEEP}}
        if found:
            name, line, why = found[0]
            return {"error": {"kind": "forbidden", "names": [name], "stage": "in its source",
                              "message": f"line {line} uses `{name}`, which {why}; submissions may not do that"}}
        # torch's lazily imported modules the file names, imported before any of its code can run (with its folder
        # not yet on the path, and no import hook of its own yet installed)
        _preload(source)
        guards.set_reporter(self._note)
        guards.ban_kernels(self.forbidden)
        hatches.watch_exports()
        hatches.watch_registrations()
        hatches.refuse_hooks()
        folders = self.folders or [os.path.dirname(self.path)]  # the learner's
        # and the scratch folder (the working directory, the one it may write in): a module written there is theirs
        hatches.set_learner_folders([*folders, os.getcwd()])
        hatches.trust_installed_code()
        hatches.compile_without_fullgraph()
        hatches.keep_thread_count()
        hatches.watch_helper_imports()
        reflection.refuse_reflection(Worker.serve.__code__)
        _hide_grader_modules()
        _as_if_imported()
        module = _module_for(self.path)
        sys.modules[module.__name__] = module
        sys.path[:0] = folders
        hatches.keep_tensor_methods()  # torch.Tensor's attributes as torch left them (after the preloads above)
        guard = guards.Guard(self.forbidden)
        # the grader's own set-up is done: a worker that ends before this note is the grader's failure, never a verdict
        # (and one sent, the learner's code cannot take it back)
        protocol.note(self.sock, set_up=True)
        try:
            with guard:
                exec(code, module.__dict__)
        except BaseException as e:  # noqa: BLE001 - the learner's import may raise anything
            guard.check_kernels()
            return {"error": self._error_safely(e, guard, "while importing your file")}
        guard.check_kernels()
        if guard.violations or guard.tampered:  # caught our exception at the top level and carried on
            return {"error": self._error(guards.ForbiddenCall(), guard, "while importing your file")}
        if "torch._dynamo" in sys.modules:  # imported by the file itself, under no name _preload looks for
            guards.keep_out_of_compilation()
        replaced = hatches.tensor_methods_replaced()
        if replaced:
            return {"error": _replaced(replaced, "while importing your file")}
        self.entry = getattr(module, self.spec["name"], None)
        try:
            problem = self._interface_problem(module)
        except BaseException as e:  # noqa: BLE001 - a __signature__, __module__ or metaclass of the learner's raised
            problem = f"`{self.spec['name']}` cannot be inspected (doing so raised {_type_name(type(e))})"
        if problem:
            return {"error": {"kind": "interface", "message": problem}}
        self.defaults = self._defaults()
        return {"ok": True, "seconds": time.perf_counter() - start, "defaults": self.defaults}

    def _defaults(self) -> dict:
        """The keyword defaults of what will be called, as callers get them (judged on the trusted side)."""
        name = self.spec["name"]
        try:
            if self.spec["kind"] == "module":
                return {f"{name}.__init__": defaults.effective(defaults.static_attribute(self.entry, "__init__"),
                                                               self.spec.get("init") or ()),
                        f"{name}.forward": defaults.effective(defaults.static_attribute(self.entry, "forward"),
                                                              self.spec["params"])}
            return {name: defaults.effective(self.entry, self.spec["params"])}
        except BaseException as e:  # noqa: BLE001 - an object of the learner's that cannot be read: said, never passed
            return {defaults.UNREADABLE: _type_name(type(e))}

    def _defaults_changed(self, ex: execute.Execution) -> dict | None:
        """What to send back when callers no longer get the keyword defaults read at the import: an error
        (rebound at run time), or defaults to judge on the trusted side against the contract: those that can
        no longer be read, or those of a ``forward`` set on an instance (``self.forward = functools.partial(...)``
        in ``__init__``: calls reach it, not the class's)."""
        now = self._defaults()
        if defaults.UNREADABLE in now:
            return {"defaults": now}
        label = f"{self.spec['name']}.forward"
        try:
            for module in ex.modules:  # an instance's own forward, as nn.Module's __call__ finds it
                found = defaults.str_keyed(_MODULE_DICT(module)).get("forward")
                if found is not None:
                    own = defaults.effective(found, self.spec["params"])
                    if own != self.defaults.get(label):
                        return {"defaults": {label: own}}
                    break
        except BaseException as e:  # noqa: BLE001
            return {"defaults": {defaults.UNREADABLE: _type_name(type(e))}}
        if now != self.defaults:
            return {"kind": "interface", "message": f"the keyword defaults of `{self.spec['name']}` changed while it "
                                                    "ran: callers must get the contract's defaults every time; do "
                                                    "not rebind them at run time"}
        return None

    def _note(self, **fields) -> None:
        try:
            protocol.note(self.sock, **fields)
        except (OSError, ValueError):
            pass  # the learner broke the socket: the reply (or its absence) tells the rest

    def _interface_problem(self, module) -> str | None:
        name, kind = self.spec["name"], self.spec["kind"]
        if self.entry is None:
            defined = sorted(k for k, v in vars(module).items()
                             if not k.startswith("_") and (inspect.isfunction(v) or inspect.isclass(v))
                             and getattr(v, "__module__", None) == module.__name__)
            extra = f" (it defines: {', '.join(defined)})" if defined else ""
            source = getattr(self, "source", None)
            if not defined and source is not None and not source.strip():
                return (f"your file is empty: it must define `{name}` (the stub `torchcode start` writes has its "
                        "signature; `torchcode reset` puts it back)")
            return f"your file does not define `{name}`{extra}"
        if kind == "module":
            if not (inspect.isclass(self.entry) and issubclass(self.entry, torch.nn.Module)):
                return f"`{name}` must be a class that subclasses torch.nn.Module"
            init, params = tuple(self.spec["init"]), tuple(self.spec["params"])
            if defaults.static_attribute(self.entry, "forward") is _MODULE_FORWARD:
                return (f"`{name}` has no `forward` method in its class: define `def forward(self, ...)` in the class "
                        "body (a forward set only on the instance, in `__init__`, cannot be checked against the "
                        "contract before it runs)")
            return (_signature_problem(self.entry.__init__, init, _count(self.spec, "init_positional", init),
                                       f"{name}.__init__", True)
                    or _signature_problem(self.entry.forward, params, _count(self.spec, "positional", params),
                                          f"{name}.forward", True))
        if inspect.isclass(self.entry) or not callable(self.entry):
            return f"`{name}` must be a function"
        params = tuple(self.spec["params"])
        return _signature_problem(self.entry, params, _count(self.spec, "positional", params), name, False)

    # -- running one case ------------------------------------------------------------------
    @staticmethod
    def _program(h: dict, tensors: list) -> execute.Program:
        return execute.Program(
            init={k: decode(v, tensors) for k, v in (h.get("init") or {}).items()} if h.get("init") is not None else None,
            state={k: decode(v, tensors) for k, v in h["state"].items()},
            steps=[(tuple(decode(a, tensors) for a in s["args"]), {k: decode(v, tensors) for k, v in s["kwargs"].items()})
                   for s in h["steps"]],
            grad=bool(h.get("grad")),
            inference=h.get("inference") is True,
            from_graph=h.get("from_graph") is True,
            train=bool(h.get("train")),
            cotangents={(c["step"], tuple(c["path"])): decode(c["t"], tensors) for c in h.get("cotangents", [])},
            fresh=frozenset(i for i, s in enumerate(h["steps"]) if s.get("fresh") is True),
            temporary=frozenset(i for i, s in enumerate(h["steps"]) if s.get("temporary") is True),
            modes={i: s["train"] for i, s in enumerate(h["steps"]) if type(s.get("train")) is bool},
            forms={int(k): f for k, f in (h.get("forms") or {}).items() if str(k).isdigit() and _is_form(f)},
            updates={i: {str(k): decode(v, tensors) for k, v in s["weights"].items()}
                     for i, s in enumerate(h["steps"]) if isinstance(s.get("weights"), dict)},
            sibling=({k: decode(v, tensors) for k, v in h["sibling"].items()}
                     if isinstance(h.get("sibling"), dict) else None),
            layouts=tuple(x if x in execute.LAYOUTS else "contiguous" for x in h.get("layouts") or ()),
        )

    def _calling(self, h: dict | None = None) -> execute.Calling:
        """How the entry point is called; a case whose header says ``positional`` passes the optional parameters it
        gives by position too, as the contract's signature lets callers (the grader's calls cover both ways)."""
        init, params = tuple(self.spec.get("init") or ()), tuple(self.spec["params"])
        n_pos = len(params) if h is not None and h.get("positional") is True else _count(self.spec, "positional", params)
        return execute.Calling(params, n_pos, init, _count(self.spec, "init_positional", init))

    def case(self, h: dict, tensors: list, msg: Message) -> dict:
        prog = self._program(h, tensors)
        prog.calling = self._calling(h)
        measured = bool(h.get("measured"))  # (what a case bounds none of is not recorded)
        guard = guards.Guard(self.forbidden, h.get("max_elements"), measured=measured, counting=measured)
        stage = execute.Stage()
        device = str(h.get("device", "cpu"))
        dtype = protocol.DTYPES.get(str(h.get("dtype", "float32")), torch.float32)
        prog.cotangents = {k: v.to(device) for k, v in prog.cotangents.items()}
        start = time.perf_counter()
        try:
            ex = execute.run(self.entry, self.spec["kind"] == "module", prog, stage, guard_factory=lambda: guard,
                             dtype=dtype, device=device)
        except execute.InterfaceProblem as e:
            return {"error": {"kind": "interface", "message": str(e)}, "seconds": time.perf_counter() - start}
        except execute.InputModified as e:
            return {"error": e.to_dict(), "seconds": time.perf_counter() - start}
        except execute.OutputUnusable as e:
            return {"error": {"kind": "output", "message": str(e)}, "seconds": time.perf_counter() - start}
        except BaseException as e:  # noqa: BLE001
            guard.check_kernels()
            return {"error": self._error_safely(e, guard, stage.name), "seconds": time.perf_counter() - start,
                    **self._memory(guard)}
        seconds = time.perf_counter() - start
        try:
            return self._results(ex, guard, stage, h, msg, seconds)
        except BaseException as e:  # noqa: BLE001 - an output object that raises when read: a verdict, never a dead worker
            msg.__init__()  # nothing half-encoded goes out with the error
            cuda = _cuda_error(e, "when its output was read")  # a device-side assert surfaces at the first sync
            if cuda is not None:
                return {"error": cuda, "seconds": seconds}
            return {"error": {"kind": "output", "message": _UNREADABLE.format(e=_safe_text(e)[:200])},
                    "seconds": seconds}

    def _results(self, ex, guard, stage, h: dict, msg: Message, seconds: float) -> dict:
        """A case's reply once the learner's calls have run: its outputs and gradients, or why they cannot be sent."""
        guard.check_kernels()
        if guard.violations or guard.tampered:  # the learner caught our exception and carried on
            return {"error": self._error(guards.ForbiddenCall(), guard, stage.name), "seconds": seconds}
        replaced = hatches.tensor_methods_replaced() or _shadowed(ex)
        if replaced:  # before anything reads the results through them
            return {"error": _replaced(replaced, "while this case ran"), "seconds": seconds}
        too_big = _too_big(ex, h.get("max_reply"))
        if too_big:
            return {"error": {"kind": "output", "message": too_big}, "seconds": seconds, **self._memory(guard)}
        changed = self._defaults_changed(ex)
        if changed and "kind" in changed:
            return {"error": changed, "seconds": seconds}
        # a gradient autograd took from the learner's backward as it was: sparse, or one we cannot send. Checked on a
        # scratch message first: the reply then carries only what it refers to
        for where, grads in (("input", ex.input_grads), ("parameter", ex.param_grads)):
            for key, g in grads.items():
                try:
                    _encode_grad(g, Message())
                except Exception as e:  # noqa: BLE001 - a verdict on the gradient, never a dead worker
                    if _cuda_error(e, "") is not None:
                        raise  # the device failed (a device-side assert, reported late): case() says so
                    return {"error": {"kind": "output", "message": _UNSENDABLE_GRAD.format(e=_safe_text(e)),
                                      **({"input": key} if where == "input" else {"parameter": str(key)[:200]})},
                            "seconds": seconds}
        input_grads = {str(i): _encode_grad(g, msg) for i, g in ex.input_grads.items()}
        param_grads = {n: _encode_grad(g, msg) for n, g in ex.param_grads.items()}
        return {
            **(changed or {}),
            "outputs": [self._encode(o, msg) for o in ex.outputs],
            "input_grads": input_grads,
            "param_grads": param_grads,
            "seconds": seconds,
            "work": ex.work,
            **self._memory(guard),
        }

    def portable(self, h: dict, tensors: list) -> dict:
        """A case once more with everything on the meta device: would the code run on a GPU?"""
        low = protocol.DTYPES.get(str(h.get("as_dtype"))) if h.get("as_dtype") is not None else None
        if low is not None and not low.is_floating_point:
            low = None
        if low is not None:  # the case in a dtype it was not graded in (its values are never compared)
            tensors = [t.to(low) if isinstance(t, torch.Tensor) and t.is_floating_point() else t for t in tensors]
        prog = self._program(h, tensors)
        prog.calling = self._calling(h)
        try:
            return portable.dry_run(self.entry, self.spec["kind"] == "module", prog, self.path,
                                    guards.Guard(self.forbidden), low)
        except BaseException:  # noqa: BLE001 - nothing to say, never a dead worker
            return {"kind": "unknown"}

    # -- benchmarking: the trusted side times each exchange from outside and checks every output ------
    def bench_setup(self, h: dict, tensors: list, msg: Message) -> dict:
        """What the next ``bench_call``s call: the function, or the module built with these weights."""
        prog = self._program(h, tensors)
        prog.calling = self._calling()
        dtype, device = protocol.DTYPES.get(str(h.get("dtype")), torch.float32), str(h.get("device", "cpu"))
        guard = guards.Guard(self.forbidden)
        try:
            with guard:
                target = execute.bench_target(self.entry, self.spec["kind"] == "module", prog, dtype=dtype, device=device)
        except BaseException as e:  # noqa: BLE001
            return {"error": self._error_safely(e, guard, "in __init__ (while benchmarking)")}
        self.benched = (target, device)
        return {"ok": True}

    def bench_call(self, h: dict, tensors: list, msg: Message) -> dict:
        """One call on the inputs that came with the request; its outputs go back to be checked."""
        target, device = self.benched
        return self._bench_run(target, self._calling(), h, tensors, msg, device)

    def bench_echo(self, h: dict, tensors: list, msg: Message) -> dict:
        """The same exchange as ``bench_call`` with a call that only makes outputs of the shapes asked for.
        Sent before the learner's file is loaded: what the trusted side measures here is the grader's
        own cost of an exchange, which it takes off each timed one."""
        device = str(h.get("device", "cpu"))
        dtype = protocol.DTYPES.get(str(h.get("dtype")), torch.float32)

        def blank(like):
            if isinstance(like, list):
                return torch.zeros(like, dtype=dtype, device=device)
            if isinstance(like, dict) and isinstance(like.get("L"), list):
                return tuple(blank(x) for x in like["L"])
            return None

        return self._bench_run(lambda *a, **kw: blank(h.get("like")), execute.Calling(), h, tensors, msg, device)

    def _bench_run(self, target, calling, h: dict, tensors: list, msg: Message, device: str) -> dict:
        guard = guards.Guard(self.forbidden)
        try:
            prog = self._program(h, tensors)
            prog.calling = calling
            args, kwargs = execute.bench_args(prog, device)
            out, peak = execute.bench_call(target, args, kwargs, device=device, guard=guard if h.get("memory") else None)
        except BaseException as e:  # noqa: BLE001
            return {"error": self._error_safely(e, guard, "while benchmarking")}
        if guard.violations or guard.tampered:
            return {"error": self._error(guards.ForbiddenCall(), guard, "while benchmarking")}
        try:
            replaced = hatches.tensor_methods_replaced() or _shadowed(execute.Execution(outputs=[out]))
            if replaced:
                return {"error": _replaced(replaced, "while benchmarking")}
            return {"outputs": [self._encode(out, msg)], **({"peak_bytes": int(peak)} if peak is not None else {})}
        except BaseException as e:  # noqa: BLE001 - an output that raises when read: a failure, never a dead worker
            msg.__init__()
            return {"error": {"kind": "output", "message": _UNREADABLE.format(e=_safe_text(e)[:200])}}

    @staticmethod
    def _memory(guard) -> dict:
        return {"largest": guard.largest, "largest_shape": guard.largest_shape, "widest": guard.widest}

    def _encode(self, v, msg: Message):
        if type(v) is torch.Tensor or type(v) is torch.nn.Parameter:
            try:
                return {"T": msg.tensor(v)["T"], "device": str(v.device)}
            except Exception as e:  # noqa: BLE001 - e.g. an unsupported dtype
                if _cuda_error(e, "") is not None:
                    raise  # the device failed (a device-side assert, reported late): case() says so
                return {"X": f"tensor that cannot be sent ({e})"}
        if isinstance(v, (tuple, list)):
            return {"L": [self._encode(x, msg) for x in v]}
        if v is None:
            return None
        if isinstance(v, execute.TooDeep):
            return {"X": "value nested more than 8 levels deep"}
        return {"X": _type_name(type(v))}

    def _error_safely(self, e: BaseException, guard, stage: str) -> dict:
        """``_error``, or (when the exception's own ``__str__``, ``errno``, class name... raise or are not
        text) a runtime error that names its class as Python defined it: never a dead worker."""
        try:
            err = self._error(e, guard, stage)
            if all(isinstance(err.get(k, ""), str) for k in ("message", "traceback")):
                return err
        except BaseException:  # noqa: BLE001 - the learner's exception misbehaves; its type is still known
            pass
        try:
            tb = "".join(traceback.format_list([f for f in traceback.extract_tb(e.__traceback__)
                                                if f.filename == self.path]))[-MAX_TRACEBACK:]
        except BaseException:  # noqa: BLE001
            tb = ""
        return {"kind": "runtime", "stage": stage, "traceback": tb,
                "message": f"{_type_name(type(e))} {stage} (its message cannot be shown: turning it into text failed)"}

    def _error(self, e: BaseException, guard, stage: str) -> dict:
        if guard.tampered:
            return {"kind": "forbidden", "names": [], "message": f"your code tampered with the grader's guards "
                    f"{stage} ({guard.tampered}); submissions may not switch them off"}
        if isinstance(e, hatches.HelperHatch):
            return {"kind": "forbidden", "names": [], "stage": stage, "message": str(e)[:500]}
        if isinstance(e, guards.ForbiddenCall) or guard.violations:
            return {"kind": "forbidden", "names": guard.violations, "message": f"called {', '.join(guard.violations)}"}
        tb = _learner_traceback(e, self.path)
        if isinstance(e, RuntimeError) and "can't start new thread" in str(e):
            return {"kind": "forbidden", "names": [], "stage": stage, "traceback": tb,
                    "message": f"your code tried to start a thread {stage}: submissions run on one thread, the one "
                               "the grader's guards watch"}
        frames = traceback.extract_tb(e.__traceback__)
        # raised in the learner's file (torch's own, "lu_cpu" not implemented for 'Half', ends in the guards' frames)
        if isinstance(e, NotImplementedError) and frames and frames[-1].filename == self.path:
            return {"kind": "not_implemented", "message": str(e), "stage": stage, "traceback": tb}
        if isinstance(e, MemoryError) or (isinstance(e, RuntimeError) and any(
                s in str(e) for s in ("can't allocate memory", "not enough memory", "DefaultCPUAllocator"))):
            return {"kind": "memory", "message": f"ran out of memory {stage}", "stage": stage, "traceback": tb}
        if isinstance(e, torch.OutOfMemoryError) or (isinstance(e, RuntimeError) and "CUDA out of memory" in str(e)):
            return {"kind": "memory", "message": f"ran out of GPU memory {stage}", "stage": stage, "traceback": tb}
        cuda = _cuda_error(e, stage, tb)
        if cuda is not None:
            return cuda
        if isinstance(e, OSError) and e.errno == errno.EPERM and any(
                f.name in ("fork", "_fork_exec", "_execute_child", "fork_exec", "posix_spawn", "system")
                for f in traceback.extract_tb(e.__traceback__)):
            return {"kind": "runtime", "message": f"your code tried to start a process {stage}; submissions may not "
                    "fork or run programs", "stage": stage, "traceback": tb}
        # a file operation refused EPERM is a change of mode, owner, times or attributes (seccomp refuses them;
        # what Landlock refuses is EACCES): os.chmod, os.utime, and shutil.copy/copy2, which copy the mode
        if isinstance(e, OSError) and e.errno == errno.EPERM and (e.filename is not None or any(
                f.name in ("copymode", "copystat", "touch") for f in traceback.extract_tb(e.__traceback__))):
            return {"kind": "runtime", "stage": stage, "traceback": tb, "message": (
                f"{type(e).__name__} {stage}: {str(e)[:200]}. Submissions may not change a file's permissions, owner "
                "or times (os.chmod, os.utime; shutil.copy and copy2 copy them): use shutil.copyfile, or keep the "
                "data in memory.")}
        if isinstance(e, RuntimeError) and ("same device" in str(e) or "Expected all tensors" in str(e)):
            return {"kind": "device", "message": f"tensors on different devices {stage}: {str(e)[:300]}",
                    "stage": stage, "traceback": tb}
        if isinstance(e, OSError) and e.errno == errno.EFBIG:
            return {"kind": "runtime", "message": f"your code printed more than the output limit "
                    f"({self.output_limit >> 20} MB) {stage}", "stage": stage, "traceback": tb}
        if isinstance(e, RuntimeError) and "leaf Variable that requires grad is being used in an in-place" in str(e):
            return {"kind": "runtime", "message": f"your code modified an input in place {stage} ({str(e)[:200]}): the "
                    "caller's tensors must be left unchanged. Use out-of-place operations (`x = x * s`, not `x *= s`; "
                    "`masked_fill`, not `masked_fill_`).", "stage": stage, "traceback": tb}
        if isinstance(e, RuntimeError) and "sparse" in str(e) and "backward" in str(stage):  # a sparse gradient reached
            # the op that made the input handed over (a view: an earlier layer's output), which takes dense ones only
            return {"kind": "runtime", "stage": stage, "traceback": tb, "message": (
                f"RuntimeError {stage}: {str(e).splitlines()[0][:160]}. A gradient came back as a sparse tensor (from "
                "`.to_sparse()` in a custom autograd.Function's backward?): the layers before yours take dense ones. "
                "Return dense tensors shaped like the inputs.")}
        if isinstance(e, RuntimeError) and "cannot be converted to type" in str(e) and "without overflow" in str(e):
            return {"kind": "runtime", "stage": stage, "traceback": tb, "message": (
                f"RuntimeError {stage}: {str(e).splitlines()[0][:160]}. A constant does not fit this dtype (float16 "
                "holds at most 65504 in size): fill masked scores with float('-inf') or torch.finfo(scores.dtype).min, "
                "not -1e9; the grader runs bfloat16 and float16 too, as a GPU does.")}
        if isinstance(e, RuntimeError) and "Creating a new Tensor subclass" in str(e):  # its constructor, under the guard
            return {"kind": "runtime", "stage": stage, "traceback": tb, "message": (
                f"RuntimeError {stage}: a tensor subclass built with its class's constructor ({str(e).split(' but ')[0]}"
                "[...]) cannot be made while the grader watches every tensor operation, as it does here. Use plain "
                "tensors: a bool mask (torch.ones(S, T, dtype=torch.bool).tril(...)) rather than a mask object of your "
                "own; torch's causal_lower_right and causal_upper_left do work.")}
        if isinstance(e, RuntimeError) and "view size is not compatible with input tensor's size and stride" in str(e):
            return {"kind": "runtime", "message": f"RuntimeError {stage}: .view() cannot reshape a tensor whose "
                    "memory is not laid out in order. Your inputs may be non-contiguous (a transposed tensor, a slice of a "
                    "larger one: callers pass such tensors). Use .reshape(...) instead of .view(...), or call "
                    ".contiguous() first.", "stage": stage, "traceback": tb}
        if isinstance(e, RuntimeError) and any(s in str(e) for s in (
                "Tensor must have a last dimension with stride 1", "Tensor must have a stride divisible by 2")):
            return {"kind": "runtime", "message": f"RuntimeError {stage}: {str(e)[:120]}. torch.view_as_complex needs "
                    "each pair's two numbers side by side in memory. Your inputs may be non-contiguous (a transposed "
                    "tensor, a slice of a larger one: callers pass such tensors): call .contiguous() before viewing "
                    "them as complex numbers.", "stage": stage, "traceback": tb}
        if portable.is_dtype_error(e):
            return {"kind": "runtime", "message": f"RuntimeError {stage}: {str(e)[:200]}. Two tensors of different "
                    "dtypes met in one operation: something your code made (a mask, a bias, a table, a cast for the "
                    "softmax) is not in the inputs' dtype. Create it with dtype=x.dtype or cast it back with "
                    ".to(x.dtype); the grader also runs bfloat16 and float16 inputs.", "stage": stage, "traceback": tb}
        if (isinstance(e, ModuleNotFoundError) and e.name and e.name.partition(".")[0] != "torchcode"
                and e.name.partition(".")[0] not in sys.modules):  # `torch.nope`: torch is there, not nope
            top = e.name.partition(".")[0]
            return {"kind": "runtime", "stage": stage, "traceback": tb, "message": (
                f"ModuleNotFoundError {stage}: No module named '{e.name}'. The package `{top}` is not available in "
                f"the grader: it runs your code with the packages installed beside torchcode (torch and the standard "
                f"library, in {sys.executable}) and the .py files beside your file. Write it with torch, or install "
                f"`{top}` there; a class's grader may not have it.")}
        if isinstance(e, SystemExit):
            msg = f"your code called sys.exit({e.code!r}) {stage}"
        elif isinstance(e, KeyboardInterrupt):
            msg = f"your code raised KeyboardInterrupt {stage}"
        else:
            msg = f"{type(e).__name__} {stage}: {str(e)[:500]}"
        return {"kind": "runtime", "message": msg, "stage": stage, "traceback": tb}

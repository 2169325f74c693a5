"""The sandboxed side: loads the learner's file and runs case programs on it.

This runs in a forked child in its own session, with resource limits, stdout and
stderr sent to a file, and no knowledge of the seed or of any expected value. It
only ever *reports* (outputs, gradients, errors, guard findings); every judgement is
made by the trusted process from those reports.
"""

from __future__ import annotations

import errno
import inspect
import os
import resource
import signal
import socket
import sys
import time
import traceback
import types

import torch

from torchcode.grader import execute, guards
from torchcode.grader import protocol
from torchcode.grader.protocol import Message, decode, receive

MAX_TRACEBACK = 4000


def main(sock_fd: int, config: dict) -> None:
    """Entry point of the forked worker; never returns."""
    try:
        confined = _confine(config, sock_fd)
        sock = socket.socket(fileno=sock_fd)
        protocol.note(sock, ready={"confined": confined})  # before any learner code: cannot be forged
        Worker(sock, int(config.get("output_bytes") or 0)).serve()
    except BaseException:  # noqa: BLE001 - nothing may escape the child
        pass
    finally:
        os._exit(0)


def _confine(config: dict, sock_fd: int) -> dict:
    """Limits, a clean set of file descriptors, then the kernel's confinement. Returns what is in force."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: die with the zygote
    except (OSError, AttributeError):
        pass
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if hasattr(signal, "SIGXFSZ"):
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # over the output limit: writes fail, no silent kill
    limits = [(resource.RLIMIT_CORE, 0)]
    if config.get("memory_mb") and config.get("device", "cpu") == "cpu":  # CUDA maps huge virtual ranges
        limits.append((resource.RLIMIT_AS, int(config["memory_mb"]) << 20))
    if config.get("output_bytes"):
        limits.append((resource.RLIMIT_FSIZE, int(config["output_bytes"])))
    for which, value in limits:
        try:
            resource.setrlimit(which, (value, value))
        except (ValueError, OSError):
            pass
    learner = os.path.realpath(config["path"])  # resolved before the chdir below
    protected = [os.path.realpath(p) for p in config.get("protected", [])]
    log = os.open(config["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    _close_fds_except({0, 1, 2, sock_fd})  # whatever the grader had open (a terminal, the store) stays out of reach
    os.chdir(config["cwd"])
    torch.set_num_threads(int(config.get("threads", 1)))
    _warm_up(str(config.get("device", "cpu")), int(config.get("threads", 1)))
    confined: dict = {"filesystem": False, "processes": False, "threads": False, "signals": False, "landlock_abi": 0}
    if config.get("confine", True):
        from torchcode.grader import confine

        folder = os.path.dirname(learner)
        readable = [learner] + ([folder] if not any(q == folder or q.startswith(folder + "/") for q in protected) else [])
        abi = confine.restrict_filesystem(protected, readable, [config["cwd"]])
        filtered = confine.seccomp(threads=False)
        confined = {"filesystem": abi > 0, "processes": filtered, "threads": filtered,
                    "signals": filtered or abi >= 6, "landlock_abi": abi}
    return confined


def _too_big(ex: execute.Execution, limit) -> str:
    """Why the results are more than the case can legitimately return ('' if they are not)."""
    if not isinstance(limit, dict):
        return ""
    found = [t for o in ex.outputs for t in execute.flatten(o).values() if isinstance(t, torch.Tensor)]
    found += [g for g in (*ex.input_grads.values(), *ex.param_grads.values()) if isinstance(g, torch.Tensor)]
    nbytes = sum(t.numel() * t.element_size() for t in found)
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


def _close_fds_except(keep: set[int]) -> None:
    try:
        fds = [int(fd) for fd in os.listdir("/proc/self/fd")]
    except OSError:
        fds = list(range(3, 1024))
    for fd in fds:
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass


def _warm_up(device: str, threads: int) -> None:
    """Let torch start every thread it will need (autograd's device threads, the intra-op pool) before
    new threads are refused: a tiny forward and backward on the grading device."""
    x = torch.ones(4, 4, device=device, requires_grad=True)
    (x @ x).softmax(-1).sum().backward()
    if threads > 1:
        torch.ones(1 << 17, device=device).add_(1)  # big enough for a parallel region


def _learner_traceback(exc: BaseException, path: str) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    mine = [f for f in frames if f.filename == path]
    text = "".join(traceback.format_list(mine or frames[-1:]) + traceback.format_exception_only(type(exc), exc))
    return text[-MAX_TRACEBACK:]


def _signature_problem(fn, expected: tuple[str, ...], label: str, skip_self: bool) -> str | None:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    params = list(sig.parameters.values())[1 if skip_self else 0:]
    names = []
    for p in params:
        if p.kind is p.VAR_POSITIONAL:
            return None if names == list(expected[:len(names)]) else _sig_msg(label, expected, sig)
        if p.kind is p.VAR_KEYWORD:
            continue
        names.append(p.name)
    if names[:len(expected)] != list(expected):
        return _sig_msg(label, expected, sig)
    for p in params[len(expected):]:
        if p.default is p.empty and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL):
            return f"`{label}` has an extra required parameter `{p.name}`: give it a default or remove it"
    return None


def _sig_msg(label, expected, sig) -> str:
    return f"`{label}` must take ({', '.join(expected)}), but yours is {label}{sig}"


class Worker:
    def __init__(self, sock: socket.socket, output_limit: int = 0):
        self.sock = sock
        self.output_limit = output_limit
        self.entry = None
        self.spec: dict = {}
        self.path = ""

    def serve(self) -> None:
        while True:
            header, tensors = receive(self.sock)
            op = header.get("op")
            if op == "load":
                msg, body = Message(), self.load(header)
            elif op == "case":
                msg = Message()
                body = self.case(header, tensors, msg)
            elif op == "bench":
                msg, body = Message(), self.bench(header, tensors)
            else:
                return
            msg.send(self.sock, body)

    # -- loading the learner's file ------------------------------------------------------
    def load(self, h: dict) -> dict:
        self.path, self.spec, self.forbidden = h["path"], h["entry"], h["forbidden"]
        start = time.perf_counter()
        try:
            with open(self.path, encoding="utf-8") as f:
                source = f.read()
        except (OSError, UnicodeDecodeError) as e:
            return {"error": {"kind": "runtime", "message": f"cannot read your file: {e}"}}
        try:
            code = compile(source, self.path, "exec")
        except SyntaxError as e:
            where = f"{e.filename}:{e.lineno}" + (f":{e.offset}" if e.offset else "")
            text = (e.text or "").rstrip("\n")
            caret = (" " * max((e.offset or 1) - 1, 0) + "^") if e.text else ""
            return {"error": {"kind": "syntax", "message": f"{where}: {e.msg}", "traceback": f"{text}\n{caret}".strip("\n")}}
        except ValueError as e:  # e.g. null bytes
            return {"error": {"kind": "syntax", "message": str(e)}}
        hatches = guards.scan_source(source)
        if hatches:
            name, line, why = hatches[0]
            return {"error": {"kind": "forbidden", "names": [name],
                              "message": f"line {line} uses `{name}`, which {why}; submissions may not do that"}}
        guards.set_reporter(self._note)
        guards.ban_kernels(self.forbidden)
        _hide_grader_modules()
        module = types.ModuleType("submission")
        module.__file__ = self.path
        sys.modules["submission"] = module
        sys.path.insert(0, os.path.dirname(self.path))
        guard = guards.Guard(self.forbidden)
        try:
            with guard:
                exec(code, module.__dict__)
        except BaseException as e:  # noqa: BLE001 - the learner's import may raise anything
            guard.check_kernels()
            return {"error": self._error(e, guard, "while importing your file")}
        guard.check_kernels()
        if guard.violations or guard.tampered:  # caught our exception at the top level and carried on
            return {"error": self._error(guards.ForbiddenCall(), guard, "while importing your file")}
        self.entry = getattr(module, self.spec["name"], None)
        problem = self._interface_problem(module)
        if problem:
            return {"error": {"kind": "interface", "message": problem}}
        return {"ok": True, "seconds": time.perf_counter() - start}

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
                             and getattr(v, "__module__", None) == "submission")
            extra = f" (it defines: {', '.join(defined)})" if defined else ""
            return f"your file does not define `{name}`{extra}"
        if kind == "module":
            if not (inspect.isclass(self.entry) and issubclass(self.entry, torch.nn.Module)):
                return f"`{name}` must be a class that subclasses torch.nn.Module"
            return (_signature_problem(self.entry.__init__, tuple(self.spec["init"]), f"{name}.__init__", True)
                    or _signature_problem(self.entry.forward, tuple(self.spec["params"]), f"{name}.forward", True))
        if inspect.isclass(self.entry) or not callable(self.entry):
            return f"`{name}` must be a function"
        return _signature_problem(self.entry, tuple(self.spec["params"]), name, False)

    # -- running one case ------------------------------------------------------------------
    @staticmethod
    def _program(h: dict, tensors: list) -> execute.Program:
        return execute.Program(
            init={k: decode(v, tensors) for k, v in (h.get("init") or {}).items()} if h.get("init") is not None else None,
            state={k: decode(v, tensors) for k, v in h["state"].items()},
            steps=[(tuple(decode(a, tensors) for a in s["args"]), {k: decode(v, tensors) for k, v in s["kwargs"].items()})
                   for s in h["steps"]],
            grad=bool(h.get("grad")),
            train=bool(h.get("train")),
            cotangents={(c["step"], tuple(c["path"])): decode(c["t"], tensors) for c in h.get("cotangents", [])},
        )

    def case(self, h: dict, tensors: list, msg: Message) -> dict:
        prog = self._program(h, tensors)
        guard = guards.Guard(self.forbidden, h.get("max_elements"))
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
        except BaseException as e:  # noqa: BLE001
            guard.check_kernels()
            return {"error": self._error(e, guard, stage.name), "seconds": time.perf_counter() - start,
                    **self._memory(guard)}
        seconds = time.perf_counter() - start
        guard.check_kernels()
        if guard.violations or guard.tampered:  # the learner caught our exception and carried on
            return {"error": self._error(guards.ForbiddenCall(), guard, stage.name), "seconds": seconds}
        too_big = _too_big(ex, h.get("max_reply"))
        if too_big:
            return {"error": {"kind": "output", "message": too_big}, "seconds": seconds, **self._memory(guard)}
        return {
            "outputs": [self._encode(o, msg) for o in ex.outputs],
            "input_grads": {str(i): (msg.tensor(g) if g is not None else None) for i, g in ex.input_grads.items()},
            "param_grads": {n: (msg.tensor(g) if g is not None else None) for n, g in ex.param_grads.items()},
            "seconds": seconds,
            **self._memory(guard),
        }

    def bench(self, h: dict, tensors: list) -> dict:
        prog = self._program(h, tensors)
        guard = guards.Guard(self.forbidden)
        try:
            return execute.bench(self.entry, self.spec["kind"] == "module", prog, guard=guard,
                                 dtype=protocol.DTYPES.get(str(h.get("dtype")), torch.float32),
                                 device=str(h.get("device", "cpu")), warmup=int(h["warmup"]), reps=int(h["reps"]))
        except BaseException as e:  # noqa: BLE001
            return {"error": self._error(e, guard, "while benchmarking")}

    @staticmethod
    def _memory(guard) -> dict:
        return {"largest": guard.largest, "largest_shape": guard.largest_shape}

    def _encode(self, v, msg: Message):
        if type(v) is torch.Tensor or type(v) is torch.nn.Parameter:
            try:
                return {"T": msg.tensor(v)["T"], "device": str(v.device)}
            except Exception as e:  # noqa: BLE001 - e.g. an unsupported dtype
                return {"X": f"tensor that cannot be sent ({e})"}
        if isinstance(v, (tuple, list)):
            return {"L": [self._encode(x, msg) for x in v]}
        if v is None:
            return None
        t = type(v)
        return {"X": f"{t.__module__}.{t.__qualname__}" if t.__module__ != "builtins" else t.__qualname__}

    def _error(self, e: BaseException, guard, stage: str) -> dict:
        if guard.tampered:
            return {"kind": "forbidden", "names": [], "message": f"your code tampered with the grader's guards "
                    f"{stage} ({guard.tampered}); submissions may not switch them off"}
        if isinstance(e, guards.ForbiddenCall) or guard.violations:
            return {"kind": "forbidden", "names": guard.violations, "message": f"called {', '.join(guard.violations)}"}
        tb = _learner_traceback(e, self.path)
        if isinstance(e, RuntimeError) and "can't start new thread" in str(e):
            return {"kind": "forbidden", "names": [], "stage": stage, "traceback": tb,
                    "message": f"your code tried to start a thread {stage}: submissions run on one thread, the one "
                               "the grader's guards watch"}
        frames = traceback.extract_tb(e.__traceback__)
        if isinstance(e, NotImplementedError) and frames and frames[-1].filename == self.path:
            return {"kind": "not_implemented", "message": str(e), "stage": stage, "traceback": tb}
        if isinstance(e, MemoryError) or (isinstance(e, RuntimeError) and any(
                s in str(e) for s in ("can't allocate memory", "not enough memory", "DefaultCPUAllocator"))):
            return {"kind": "memory", "message": f"ran out of memory {stage}", "stage": stage, "traceback": tb}
        if isinstance(e, OSError) and e.errno == errno.EPERM and any(
                f.name in ("fork", "_fork_exec", "_execute_child", "fork_exec", "posix_spawn", "system")
                for f in traceback.extract_tb(e.__traceback__)):
            return {"kind": "runtime", "message": f"your code tried to start a process {stage}; submissions may not "
                    "fork or run programs", "stage": stage, "traceback": tb}
        if isinstance(e, RuntimeError) and ("same device" in str(e) or "Expected all tensors" in str(e)):
            return {"kind": "device", "message": f"tensors on different devices {stage}: {str(e)[:300]}",
                    "stage": stage, "traceback": tb}
        if isinstance(e, OSError) and e.errno == errno.EFBIG:
            return {"kind": "runtime", "message": f"your code printed more than the output limit "
                    f"({self.output_limit >> 20} MB) {stage}", "stage": stage, "traceback": tb}
        if isinstance(e, SystemExit):
            msg = f"your code called sys.exit({e.code!r}) {stage}"
        elif isinstance(e, KeyboardInterrupt):
            msg = f"your code raised KeyboardInterrupt {stage}"
        else:
            msg = f"{type(e).__name__} {stage}: {str(e)[:500]}"
        return {"kind": "runtime", "message": msg, "stage": stage, "traceback": tb}

"""The process behind a :class:`torchcode.session.Session` (``python -m torchcode.session.server``).

It imports torch, forks the grader's zygote before any tensor op, says it is ready, then grades
one request at a time: requests and replies are JSON lines on a socket the session passes it
(anything printed goes to the session's log). Every grade forks a fresh
confined worker from the zygote; the reference side of each problem is built once and kept.

(All on the socket the session passed as argv[1]; stdin, stdout and stderr are not used for them.)
Lines in:  {"op": "grade", "problem": ID, "path": FILE | null, "source": TEXT | null,
            "seed": N | null, "dtypes": [...] | null, "gpu_dry_run": false, "imports_from": [DIR, ...]}
            (imports_from is optional: for that grade only, instead of the session's Limits.imports_from)
           {"op": "warm", "problems": [ID, ...]}
           {"op": "bench", "problem": ID, "path": FILE, "dtype": D, "sizes": [...] | null, "reps": N}
Lines out: {"ready": true, "device": "cpu", "pid": N, "sources": DIR}  (once, at start; DIR: its temporary folder)
           {"event": {...}}                                      (progress of a grade)
           {"report": {...}} | {"bench": {...}} | {"ok": true}     (the answer)
           {"error": {"kind": "usage" | "grader" | "cancelled" | "internal", "message": "..."}}

SIGINT cancels the grade in flight (once per grade; ignored between grades). End of input, SIGTERM
or the death of the process that started it end it, with its zygote and workers.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

_grading = False
_raised = False


def _on_sigint(signum, frame) -> None:
    global _raised
    if _grading and not _raised:
        _raised = True
        raise KeyboardInterrupt


def _on_sigterm(signum, frame) -> None:
    raise SystemExit(0)


def _orphan_watch(parent: int) -> None:
    """The process that started us died mid-grade (the end of its input is only seen between grades)."""
    while os.getppid() == parent:
        time.sleep(0.5)
    os.kill(os.getpid(), signal.SIGTERM)


def main() -> None:
    global _grading, _raised
    sock = socket.socket(fileno=int(sys.argv[1]))
    requests = sock.makefile("r", encoding="utf-8")
    signal.signal(signal.SIGINT, _on_sigint)
    signal.signal(signal.SIGTERM, _on_sigterm)
    _not_dumpable()

    def send(obj: dict) -> None:
        sock.sendall((json.dumps(obj) + "\n").encode())

    config = json.loads(requests.readline() or "{}")
    from torchcode.errors import GraderError, TorchcodeError
    from torchcode.grader.judge import Grader, resolve_device
    from torchcode.grader.limits import Limits
    from torchcode.grader.tree import SCRATCH
    from torchcode.grader.tree import remove_tree

    limits = Limits(**config.get("limits", {}))
    dirs = [Path(p) for p in config.get("problems_dirs") or []] or None
    # every temporary file of this session (and of its zygote: torch's caches, such as the meta kernels' of a
    # GPU dry run) goes under one folder of its own, removed at the end, as `check` does
    # (made by the client, which removes it however this process ends)
    root = Path(config["tmp"]) if config.get("tmp") else Path(tempfile.mkdtemp(prefix=SCRATCH))
    tempfile.tempdir = str(root)
    grader = None
    try:
        grader = Grader(limits)  # the zygote: forked before this process runs a tensor op
        limits.device = resolve_device(limits.device)
    except GraderError as e:
        send({"error": {"kind": "grader", "message": e.cause}})
        remove_tree(root)
        return
    except TorchcodeError as e:  # e.g. --device cuda on a machine without CUDA
        if grader is not None:
            grader.close()
        send({"error": {"kind": "usage", "message": str(e)}})
        remove_tree(root)
        return
    except BaseException:  # SIGTERM while the zygote starts: nothing left behind
        remove_tree(root)
        raise
    import torch

    torch.set_num_threads(limits.threads)  # the trusted side computes with the worker's threads (judge.threads)
    sources = root / "sources"  # texts to grade (a notebook cell, an editor)
    sources.mkdir()
    threading.Thread(target=_orphan_watch, args=(int(config.get("parent") or os.getppid()),), daemon=True).start()
    send({"ready": True, "device": limits.device, "pid": os.getpid(), "sources": str(root)})
    last = None  # the (problem, file, dtypes) graded last
    imports_from = list(limits.imports_from)  # the session's; a grade may name its own (a notebook's current folder)
    try:
        for line in requests:
            try:
                req = json.loads(line)
                if req.get("op") == "warm":
                    cat = _catalog(dirs)
                    for pid in req.get("problems") or []:
                        grader.problem(cat.get(pid)).cases  # noqa: B018 (builds the reference side)
                    send({"ok": True})
                elif req.get("op") == "grade":
                    _raised = False
                    _grading = True
                    folders = req.get("imports_from")
                    limits.imports_from = ([str(f) for f in folders] if isinstance(folders, list) else imports_from)
                    try:
                        spec, path = _submission(_catalog(dirs, req), req, sources)
                        report = grader.grade(spec, path, seed=req.get("seed"), dtypes=req.get("dtypes"),
                                              on_event=lambda ev: send({"event": ev}),
                                              gpu_dry_run=bool(req.get("gpu_dry_run")))
                    finally:
                        _grading = False
                    send({"report": report.to_dict()})
                    # The next grade is most likely of this problem again: its cases, ready before it comes. A
                    # file graded twice in a row (watch, a notebook cell, the browser) will be again: its worker
                    # too (not for a class, where each file is graded once and such a worker would be wasted).
                    key = (spec.id, str(path), repr(req.get("dtypes")), repr(limits.imports_from))
                    if key == last:
                        grader.spawn_ahead(spec, path, req.get("dtypes"))
                    last = key
                    grader.prepare_ahead(spec, req.get("dtypes"), seed=req.get("seed"))
                elif req.get("op") == "bench":  # an accepted kernel against the reference (torchcode.grader.bench)
                    from torchcode.grader.bench import run_bench

                    limits.imports_from = imports_from  # the session's own, not the last grade's
                    _raised = False
                    _grading = True
                    try:
                        spec, path = _submission(_catalog(dirs, req), req, sources)
                        grader.drop_ahead()  # nothing else runs while it is timed
                        bench = run_bench(grader, spec, path, dtype=str(req.get("dtype") or "float32"),
                                          sizes=req.get("sizes"), reps=int(req.get("reps") or 5))
                    finally:
                        _grading = False
                    send({"bench": bench.to_dict()})
                else:
                    send({"error": {"kind": "internal", "message": f"unknown request {req.get('op')!r}"}})
            except KeyboardInterrupt:
                _grading = False
                send({"error": {"kind": "cancelled", "message": "the check was cancelled"}})
            except GraderError as e:
                send({"error": {"kind": "grader", "message": e.cause}})
            except TorchcodeError as e:  # an unknown problem, a missing file, a broken problem pack
                send({"error": {"kind": "usage", "message": str(e)}})
            except Exception as e:  # a bug of ours: said, never a verdict
                send({"error": {"kind": "internal", "message": f"{type(e).__name__}: {e}",
                                "traceback": traceback.format_exc()[-4000:]}})
    except SystemExit:
        pass
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        grader.close()
        remove_tree(root)


def _not_dumpable() -> None:
    """Other processes of the same user (a worker that Landlock does not confine) may not read this one's
    memory or take its file descriptors (ptrace, /proc/PID/mem, pidfd_getfd); its zygote and workers
    inherit it. Root keeps the power to, and Landlock is what stops a worker then."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(4, 0)  # PR_SET_DUMPABLE
    except (OSError, AttributeError):
        pass


def _catalog(dirs, req: dict | None = None):
    """The session's packs, and those a request names besides (``packs``: the packs a folder remembers for the
    problems started in it, which the session was not started with)."""
    from torchcode.catalog import load_catalog

    extra = [Path(p) for p in (req or {}).get("packs") or [] if isinstance(p, str)]
    return load_catalog([*(dirs or []), *extra] or None)


def _submission(cat, req: dict, sources: Path):
    """(spec, file) of a request; a text is written to this session's own file for the problem (the
    same file each time, so a worker can be started for it ahead of the text)."""
    spec = cat.get(str(req["problem"]))
    if req.get("source") is None:
        return spec, Path(req["path"])
    folder = sources / spec.id
    folder.mkdir(exist_ok=True)
    path = folder / f"{spec.id}.py"
    try:
        path.write_text(str(req["source"]), encoding="utf-8")
    except UnicodeEncodeError as e:  # a lone surrogate: no file (and no Python source) can hold it
        from torchcode.errors import UsageError

        raise UsageError(f"the code holds a character that cannot be graded (position {e.start}: "
                         f"{str(req['source'])[e.start:e.end]!a}); remove it") from None
    return spec, path


if __name__ == "__main__":
    main()

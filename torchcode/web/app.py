"""The routes of `torchcode serve` (Starlette). Every request has passed ``security.Guard`` first.

Pages are rendered here (jinja2, data for the page's script embedded as inert JSON); the page's
script calls the JSON API below. A check streams newline-delimited JSON events: the session's own
(``started``, ``case``, ``case_done``), then ``report`` (the CLI's report as HTML and as data) or
``error``. One check at a time per server: a second one is refused while the first runs.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import logging
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from torchcode.errors import ProblemNotFound, TorchcodeError
from torchcode.session import Cancelled
from torchcode.web.workspace import Conflict, Workspace

HERE = Path(__file__).resolve().parent
log = logging.getLogger("torchcode.serve")
MAX_BODY = 2_000_000


def create_app(ws: Workspace, *, warm: bool = True) -> Starlette:
    env = Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=select_autoescape(["html"]))
    env.globals["asset"] = _asset
    checks = ThreadPoolExecutor(max_workers=1, thread_name_prefix="torchcode-check")
    busy = threading.Lock()

    def page(name: str, **data) -> HTMLResponse:
        return HTMLResponse(env.get_template(name).render(**data))

    async def index(request: Request):
        return page("list.html", data=await run_in_threadpool(ws.listing), folder=str(ws.dir))

    async def problem_page(request: Request):
        pid = request.path_params["pid"]
        try:
            data = await run_in_threadpool(ws.problem, pid)
        except ProblemNotFound as e:
            return HTMLResponse(env.get_template("missing.html").render(message=str(e)), status_code=404)
        except TorchcodeError as e:  # the learner's file cannot be shown (a folder of that name, unreadable)
            return HTMLResponse(env.get_template("missing.html").render(message=str(e)), status_code=409)
        if warm:
            _warm(pid)
        return page("problem.html", data=data, folder=str(ws.dir))

    def _warm(pid: str) -> None:
        def go():
            try:
                s = ws.session()
                s.warm([pid])
            except Exception as e:  # the first check says what went wrong, in full
                log.debug("warming %s failed: %s", pid, e)
        checks.submit(go) if not busy.locked() else None

    async def api_list(request: Request):
        return JSONResponse(await run_in_threadpool(ws.listing))

    async def api_file(request: Request):
        pid = request.path_params["pid"]
        if request.method == "GET":
            return await _json(ws.file, pid)
        body = await _body(request)
        if isinstance(body, Response):
            return body
        if not isinstance(body.get("text"), str):
            return _error(400, "send {\"text\": ..., \"sha\": ...}")
        return await _json(ws.save, pid, body["text"], body.get("sha"))

    async def api_action(request: Request):
        pid, action = request.path_params["pid"], request.path_params["action"]
        body = await _body(request)
        if isinstance(body, Response):
            return body
        if action == "start":
            return await _json(ws.start, pid)
        if action == "reset":
            return await _json(ws.reset, pid)
        if action == "convert":
            return await _json(ws.convert, pid, body.get("sha"))
        if action == "hint":
            return await _json(ws.hint, pid)
        if action == "solution":
            return await _json(ws.solution, pid, bool(body.get("confirm")))
        if action == "attempts":
            return await _json(ws.attempts, pid)
        if action == "check":
            return await check(pid, body)
        if action == "bench":
            return await bench(pid)
        return _error(404, f"no action {action!r}")

    async def check(pid: str, body: dict):
        if not busy.acquire(blocking=False):
            return _error(409, "a check or a benchmark is already running; wait for it to finish")
        try:
            ws.spec(pid)
            if isinstance(body.get("text"), str):  # the editor's text is saved first: the file is what is graded
                await run_in_threadpool(ws.save, pid, body["text"], body.get("sha"))
        except Conflict as e:
            busy.release()
            return JSONResponse({"error": "the file changed on disk since the page loaded it", "file": e.current},
                                status_code=409)
        except TorchcodeError as e:
            busy.release()
            return _error(404 if isinstance(e, ProblemNotFound) else 400, str(e))
        except BaseException:
            busy.release()
            raise
        dry = bool(body.get("gpu_dry_run"))
        return _job(lambda emit: {"event": "report", **ws.check(pid, emit, dry)}, ws.cancel,
                    "the check was stopped and nothing was recorded")

    async def bench(pid: str):
        try:
            ws.spec(pid)
        except ProblemNotFound as e:
            return _error(404, str(e))
        if not busy.acquire(blocking=False):
            return _error(409, "a check or a benchmark is already running; wait for it to finish")
        return _job(lambda emit: {"event": "bench", **ws.bench(pid)}, ws.cancel_bench, "the benchmark was stopped")

    def _job(run, cancel, cancelled: str) -> StreamingResponse:
        """Run ``run(emit)`` in the grading thread (``busy`` is held), streaming its events as NDJSON;
        if the page goes away before the end, ``cancel()`` stops it."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue = asyncio.Queue()
        gone = threading.Event()  # the page went away before the job even started

        def emit(ev):
            loop.call_soon_threadsafe(queue.put_nowait, ev)

        def work():
            try:
                if gone.is_set():
                    raise Cancelled("the page went away")
                emit(run(emit))
            except Cancelled:
                emit({"event": "cancelled", "message": cancelled})
            except TorchcodeError as e:
                emit({"event": "error", "message": str(e)})
            except Exception as e:
                log.exception("grading job failed")
                emit({"event": "error", "message": f"torchcode could not finish: {type(e).__name__}: {e}"})
            finally:
                busy.release()
                emit(None)

        future = loop.run_in_executor(checks, work)

        async def stream():
            try:
                while True:
                    ev = await queue.get()
                    if ev is None:
                        break
                    yield json.dumps(ev) + "\n"
            finally:
                if not future.done():  # the page went away: stop it, record nothing
                    gone.set()
                    cancel()

        return StreamingResponse(stream(), media_type="application/x-ndjson")

    @asynccontextmanager
    async def lifespan(app):
        if warm:  # start the grading session now, so the first check is warm
            checks.submit(_start_session)
        yield
        await run_in_threadpool(ws.close)
        checks.shutdown(wait=False, cancel_futures=True)

    def _start_session():
        try:
            import torchcode.render.report  # noqa: F401  (rich's rendering: imported now, not during the first check)

            ws.session()
        except Cancelled:  # Ctrl-C while it started: nothing to say
            pass
        except Exception as e:  # said in the terminal now; each check tries again and says it in the page
            print(f"warning: the grading session could not start; checks will try again: {e}", file=sys.stderr, flush=True)

    routes = [
        Route("/", index),
        Route("/p/{pid}", problem_page),
        Route("/api/problems", api_list),
        Route("/api/p/{pid}/file", api_file, methods=["GET", "PUT"]),
        Route("/api/p/{pid}/{action}", api_action, methods=["POST"]),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    return Starlette(routes=routes, lifespan=lifespan)


@functools.lru_cache(maxsize=None)
def _asset(rel: str) -> str:
    """A vendored file's URL, named by its content: the browser keeps it without asking again."""
    digest = hashlib.sha256((HERE / "static" / rel).read_bytes()).hexdigest()[:12]
    return f"/static/{rel}?v={digest}"


async def _json(fn, *args) -> Response:
    try:
        return JSONResponse(await run_in_threadpool(fn, *args))
    except Conflict as e:
        return JSONResponse({"error": "the file changed on disk since the page loaded it", "file": e.current},
                            status_code=409)
    except ProblemNotFound as e:
        return _error(404, str(e))
    except TorchcodeError as e:
        return _error(400, str(e))


async def _body(request: Request):
    raw = b""
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > MAX_BODY:
            return _error(413, "the request is too large")
    if not raw:
        return {}
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError):  # RecursionError: nested deeper than the parser goes
        return _error(400, "the request body is not JSON")
    return body if isinstance(body, dict) else _error(400, "the request body must be a JSON object")


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)

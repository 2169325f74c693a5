"""The pool on a Ray cluster: one warm grading session per Ray actor (``torchcode grade --ray``).

The instructor's process keeps the gradebook and the files: each submission travels to an actor
as its bytes, with the helper modules beside it (discover.helper_files), and the extra problem packs (``--problems-dir``, ``TORCHCODE_PROBLEMS``) travel once,
as a tar archive, when the actor starts; the built-in course is the one installed on the node
(every node needs torchcode, same version, in the Python that Ray runs). An actor asks for a GPU
(``num_gpus=1``) when grading on CUDA. Ray is imported only here.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import shutil
import tarfile
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Iterator

from torchcode import paths
from torchcode.classroom.discover import Submission, helper_files
from torchcode.classroom.pool import Outcome, bench_one, by_problem, grade_one
from torchcode.errors import GraderError, UsageError
from torchcode.grader.tree import SCRATCH

IN_FLIGHT = 2  # grades queued per actor, so it never waits for the next round trip


class GradingActor:
    """Runs in a Ray worker process; holds one Session (a separate process that imports torch)."""

    def __init__(self, packs: list[bytes], limits: dict, device: str, problems: list[str]):
        import os

        from torchcode.grader.limits import Limits
        from torchcode.session import Session

        os.environ.pop("TORCHCODE_PROBLEMS", None)  # those packs came with ``packs``
        self.tmp = Path(tempfile.mkdtemp(prefix=SCRATCH))
        dirs = []
        for n, blob in enumerate(packs):
            dest = self.tmp / f"pack{n}"
            with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
                _extract(tar, dest)
            dirs.append(dest)
        limits = {**limits, "protect": [*limits.get("protect", []), str(self.tmp)]}  # the other submissions sent here
        self.session = Session(problems_dirs=dirs, limits=Limits(**limits), device=device)
        self.session.start()
        if problems:
            self.session.warm(problems)

    def device(self) -> str:
        return self.session.device

    def grade(self, job: Submission, source: bytes, seed: int, dtypes, gpu_dry_run: bool = False,
              helpers: dict[str, bytes] | None = None) -> Outcome:
        with self._laid_out(job, source, helpers) as path:
            return grade_one(self.session, job, seed, dtypes, path=path, gpu_dry_run=gpu_dry_run)

    def bench(self, job: Submission, source: bytes, helpers: dict[str, bytes] | None = None) -> Outcome:
        with self._laid_out(job, source, helpers) as path:
            return bench_one(self.session, job, path)

    @contextlib.contextmanager
    def _laid_out(self, job: Submission, source: bytes, helpers: dict[str, bytes] | None):
        """The submission written with its helper modules in a folder of its own (grades run concurrently here:
        another of the student's files must not see these, nor lose them when it ends), removed afterwards."""
        folder = Path(tempfile.mkdtemp(prefix=SCRATCH, dir=self.tmp)) / _safe(job.student)
        folder.mkdir()
        try:
            for name, data in (helpers or {}).items():
                if _safe(name) == name and name.endswith(".py") and name != f"{job.problem}.py":
                    (folder / name).write_bytes(data)
            path = folder / f"{job.problem}.py"
            path.write_bytes(source)
            yield path
        finally:
            shutil.rmtree(folder.parent, ignore_errors=True)

    def cancel(self) -> None:
        self.session.cancel()

    def close(self) -> None:
        self.session.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


class RayPool:
    backend = "Ray"

    def __init__(self, workers: int | None, address: str | None, problems_dirs: list[Path] | None, limits, device: str,
                 problems: list[str] = ()):
        self.workers, self.address, self.device = workers, address, device
        self._limits, self._problems = limits, list(problems)
        self._packs = [_tar(p) for p in paths.extra_packs(problems_dirs)]
        self.actors: list = []
        self._started_ray = False

    @property
    def started(self) -> bool:
        return bool(self.actors)

    def start(self) -> None:
        try:
            import ray
        except ImportError:
            raise UsageError("--ray needs Ray: pip install 'torchcode[ray]'") from None
        self.ray = ray
        if not ray.is_initialized():
            kw = dict(include_dashboard=False, logging_level=logging.ERROR, log_to_driver=False)
            try:
                if self.address:
                    ray.init(address=self.address, **kw)
                else:
                    ray.init(num_cpus=self.workers or os.cpu_count() or 1, **kw)
            except (ConnectionError, RuntimeError, ValueError) as e:
                raise UsageError(f"cannot start or join the Ray cluster{' at ' + self.address if self.address else ''}: {e}") from None
            self._started_ray = True
        resources = ray.cluster_resources()
        gpus = resources.get("GPU", 0)
        if self.device == "cuda" and not gpus:
            raise UsageError("--device cuda: the Ray cluster has no GPU")
        num_gpus = 1 if self.device == "cuda" or (self.device == "auto" and gpus) else 0
        if self.workers is None:  # one actor per GPU, or per CPU, of the cluster
            self.workers = max(1, int(gpus if num_gpus else resources.get("CPU", 1)))
        limits = asdict(self._limits)
        limits["device"] = "cuda" if num_gpus else "cpu"
        actor = ray.remote(num_cpus=1, num_gpus=num_gpus, max_concurrency=IN_FLIGHT + 1)(GradingActor)
        self.actors = [actor.remote(self._packs, limits, limits["device"], self._problems) for _ in range(self.workers)]
        try:
            devices = ray.get([a.device.remote() for a in self.actors])
        except ray.exceptions.RayActorError as e:
            raise GraderError(f"a Ray actor could not start its grading session ({_cause(e)})") from None
        self.device = devices[0]

    def results(self, jobs: list[Submission], seed: int, dtypes, gpu_dry_run: bool = False) -> Iterator[Outcome]:
        ray = self.ray
        todo = list(reversed(by_problem(jobs)))
        pending: dict = {}  # object ref -> (actor, job)
        load = {id(a): 0 for a in self.actors}

        def feed():
            for a in self.actors:
                while todo and load[id(a)] < IN_FLIGHT:
                    job = todo.pop()
                    pending[a.grade.remote(job, job.path.read_bytes(), seed, dtypes, gpu_dry_run,
                                           helper_files(job.path))] = (a, job)
                    load[id(a)] += 1

        feed()
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                a, job = pending.pop(ref)
                load[id(a)] -= 1
                try:
                    outcome = ray.get(ref)
                except ray.exceptions.RayError as e:
                    outcome = Outcome(job, error=f"the Ray actor failed ({_cause(e)})")
                outcome.submission = job
                yield outcome
            feed()

    def bench(self, job: Submission) -> Outcome:
        """Time one accepted kernel on the first actor (one at a time: nothing else runs on it meanwhile)."""
        try:
            return self.ray.get(self.actors[0].bench.remote(job, job.path.read_bytes(), helper_files(job.path)))
        except self.ray.exceptions.RayError as e:
            return Outcome(job, error=f"the Ray actor failed ({_cause(e)})")

    def close(self) -> None:
        if not self.actors and not self._started_ray:
            return  # never started
        ray = self.ray
        try:
            ray.get([a.cancel.remote() for a in self.actors], timeout=10)
            ray.get([a.close.remote() for a in self.actors], timeout=30)
        except Exception:
            pass
        for a in self.actors:
            ray.kill(a)
        self.actors = []
        if self._started_ray:
            ray.shutdown()
            self._started_ray = False


def _tar(pack: Path) -> bytes:
    pack = pack.expanduser().resolve()
    if not pack.is_dir():
        raise UsageError(f"problem pack {pack} does not exist or is not a folder")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for sub in ("problems", "solutions", "templates"):
            if (pack / sub).is_dir():
                tar.add(pack / sub, arcname=sub, filter=lambda t: None if "__pycache__" in t.name else t)
    return buf.getvalue()


def _extract(tar: tarfile.TarFile, dest: Path) -> None:
    """Unpack a pack archive: plain files and folders inside ``dest`` only."""
    if hasattr(tarfile, "data_filter"):  # Python 3.11.4+
        tar.extractall(dest, filter="data")
        return
    safe = [m for m in tar.getmembers() if (m.isfile() or m.isdir()) and not m.name.startswith("/")
            and ".." not in Path(m.name).parts]
    tar.extractall(dest, members=safe)


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_.@" else "_" for c in name) or "_"


def _cause(e: BaseException) -> str:
    return str(e).strip().splitlines()[-1][:500] if str(e).strip() else type(e).__name__

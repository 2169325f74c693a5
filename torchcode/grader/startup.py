"""How a worker gets ready, before any learner code runs: limits, streams, the device, confinement.

The order matters (see ``start``): process settings, then the device (CUDA must be initialised before
the filesystem rules), then a warm-up that starts every thread torch needs, then the kernel-memory bound,
then Landlock and seccomp. Anything failing here is a ``StartFailure``: the machine's, never the learner's.
"""

from __future__ import annotations

import importlib
import os
import resource
import signal
import sys
import warnings

import torch

from torchcode.grader import protocol


class StartFailure(Exception):
    """The worker could not get ready to run a submission (no learner code has run)."""


def start(config: dict, sock_fd: int) -> dict:
    """Process settings, then the device, then confinement: CUDA must be initialised before the
    filesystem rules (it reads driver files Landlock would hide: cudaGetDeviceCount error 304), and
    torch must have started every thread it needs before new threads are refused.
    Returns what confinement is in force."""
    device = config.get("device", "cpu")
    steps = [("setting up the worker process", lambda: _setup(config, sock_fd)),
             (f"initialising the {device} device", lambda: _init_device(config)),
             ("warming up torch", lambda: _warm_up(str(device), int(config.get("threads", 1)))),
             ("bounding the kernel memory it may hold", _bound_kernel_memory)]
    confined: dict = {"filesystem": False, "processes": False, "threads": False, "signals": False, "landlock_abi": 0}
    if config.get("confine", True):
        steps.append(("confining the worker (Landlock, seccomp)", lambda: confined.update(_confine(config))))
    for what, step in steps:
        try:
            step()
        except BaseException as e:  # noqa: BLE001 - whatever went wrong, it is not the learner's
            raise StartFailure(f"{what} failed: {type(e).__name__}: {e}") from None
    return confined


def _setup(config: dict, sock_fd: int) -> None:
    """Limits, signals, a clean set of file descriptors, the scratch directory."""
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
    if config.get("memory_mb") and config.get("address_limit", True):  # not on CUDA: it maps huge virtual ranges
        # (the grader watches the memory such a worker holds instead)
        # on top of what this process maps already: torch itself, ~1 GB on a CPU build, several on a CUDA build
        limits.append((resource.RLIMIT_AS, _mapped_bytes() + (int(config["memory_mb"]) << 20)))
    if config.get("output_bytes"):
        limits.append((resource.RLIMIT_FSIZE, int(config["output_bytes"])))
    for which, value in limits:
        try:
            resource.setrlimit(which, (value, value))
        except (ValueError, OSError):
            pass
    learner = os.path.realpath(config["path"])  # resolved before the chdir below
    config["started_in"] = os.getcwd()  # the grader's own directory (a user's folder, on sys.path under -m)
    protected = [os.path.realpath(p) for p in config.get("protected", [])]
    log = os.open(config["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    _close_fds_except({0, 1, 2, sock_fd})  # whatever the grader had open (a terminal, the store) stays out of reach
    # Fresh streams on the output file, written through: whatever the grader's streams were (the CLI's
    # pipe-safe wrappers, a buffer), everything printed reaches the file before a kill can lose it.
    sys.stdout = open(1, "w", buffering=1, encoding="utf-8", errors="backslashreplace", closefd=False)
    sys.stderr = open(2, "w", buffering=1, encoding="utf-8", errors="backslashreplace", closefd=False)
    sys.stdout.reconfigure(write_through=True)
    sys.stderr.reconfigure(write_through=True)
    sys.stdout.buffer.raw.name, sys.stderr.buffer.raw.name = "<stdout>", "<stderr>"  # as Python names its own
    os.chdir(config["cwd"])
    _scratch_caches(config["cwd"])
    torch.set_num_threads(int(config.get("threads", 1)))
    config["path"], config["protected"] = learner, protected


# Where libraries write temporary files and compiled-kernel caches (tempfile, Triton and Inductor behind
# torch.compile and checkpoint, the CUDA driver's JIT cache, XDG caches): by default /tmp and the home
# directory, which confinement leaves read-only. Set before the device starts (the driver reads its own then).
SCRATCH_ENV = {"TMPDIR": "", "XDG_CACHE_HOME": ".cache", "TRITON_CACHE_DIR": ".cache/triton",
               "TORCHINDUCTOR_CACHE_DIR": ".cache/inductor", "CUDA_CACHE_PATH": ".cache/nv"}


def _scratch_caches(scratch: str) -> None:
    import tempfile

    for var, sub in SCRATCH_ENV.items():
        os.environ[var] = os.path.join(scratch, sub) if sub else scratch
    tempfile.tempdir = None  # computed again, from TMPDIR, on first use


def _mapped_bytes() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _init_device(config: dict) -> None:
    """Run the device initialiser: ``init_device``, or the ``module:function`` named by
    ``config["device_init"]`` (``TORCHCODE_DEVICE_INIT``; tests use it to simulate a device)."""
    init = init_device
    if config.get("device_init"):
        module, _, name = str(config["device_init"]).partition(":")
        init = getattr(importlib.import_module(module), name)
    init(config.get("device", "cpu"), list(config.get("dtypes") or ["float32"]), bool(config.get("sdpa")))


def no_cudnn_attention() -> None:
    """Leave cuDNN out of F.scaled_dot_product_attention's choices on CUDA (the learner's calls and the reference's
    alike; flash, memory-efficient and math kernels remain, each within tolerance): cuDNN builds a plan for every
    new shape, 74 ms each on an H100 (the first 720 ms), against 0.03 ms for the flash kernel, and a case's calls
    come in many shapes (a decode loop, a growing cache): `check minimind_attention` took 113 s there."""
    enable = getattr(torch.backends.cuda, "enable_cudnn_sdp", None)  # torch 2.3+
    if enable is not None:
        enable(False)


def init_device(device: str, dtypes: list[str], sdpa: bool = False) -> None:
    """Make ``device`` usable and load the kernels grading will use there, so no case pays for it.

    On CUDA: create the context, then run matmul, softmax and backward (and the fused attention
    kernels, where the problem allows ``sdpa``) once in each graded dtype. CUDA loads kernels
    lazily; the first fused low-precision attention call costs about a second. The CPU needs nothing.
    """
    if device != "cuda":
        # A CPU worker on a machine with a GPU: autograd's first backward asks CUDA how many devices there are (to
        # start a thread for each), which fails under this worker's limits; torch printed "CUDA initialization:
        # Unexpected error from cudaGetDeviceCount()" into the learner's output. Hide the GPUs, and ask here, once
        # and quietly: the answer (0) is kept, and no later backward asks again.
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
        ask = getattr(torch._C, "_cuda_getDeviceCount", None)  # what autograd asks (not torch.cuda's, via NVML)
        if ask is not None:  # a CUDA build of torch
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ask()
        return
    torch.cuda.init()
    no_cudnn_attention()
    import torch.nn.functional as F

    for name in dtypes:
        x = torch.randn(1, 2, 16, 64, device=device, dtype=protocol.DTYPES[name], requires_grad=True)
        y = (x @ x.transpose(-2, -1)).softmax(-1) @ x
        if sdpa:
            causal = torch.ones(16, 16, dtype=torch.bool, device=device).tril()
            y = y + F.scaled_dot_product_attention(x, x, x, is_causal=True)
            y = y + F.scaled_dot_product_attention(x, x, x, attn_mask=causal)
        y.sum().backward()
    torch.cuda.synchronize()


def import_folders(config: dict) -> list[str]:
    """The folders a submission imports its own modules from: its file's, and for a text graded from a
    notebook (``Limits.imports_from``) the notebook's."""
    folders = [os.path.dirname(config["path"])]
    folders += [os.path.realpath(f) for f in config.get("imports_from") or []]
    return list(dict.fromkeys(folders))


def _list_for_imports(folder: str) -> None:
    """Fill the import system's listing of ``folder`` now, while it may still be listed."""
    for hook in sys.path_hooks:
        try:
            finder = hook(folder)
        except ImportError:
            continue
        sys.path_importer_cache[folder] = finder
        if hasattr(finder, "find_spec"):
            finder.find_spec("_torchcode_listing_")  # a name no folder holds: it lists the folder, finds nothing
        return


SHARED_TEMP = {"/tmp", "/var/tmp", os.path.realpath("/tmp"), os.path.realpath("/var/tmp")}


def _confine(config: dict) -> dict:
    """The kernel's confinement (Landlock, seccomp). Returns what is in force."""
    from torchcode.grader import confine

    learner, protected = config["path"], config["protected"]
    readable = [learner]
    home = os.path.realpath(os.path.expanduser("~"))
    for folder in import_folders(config):  # `import myhelpers` works from these, as in plain Python
        if confine._under(home, folder) or folder in SHARED_TEMP:
            # the home directory, one of its parents (`/`: a notebook started there, a file at /sdpa.py) or the
            # temporary directory itself: never opened up, only the file (every protected tree is under `/`)
            continue
        if not any(confine._under(q, folder) for q in protected):
            readable.append(folder)
            continue
        # the folder holds a protected tree (the progress store: TORCHCODE_HOME inside it, or a learner working
        # in ~): its other entries stay readable, and the import system lists it now (it may not list it once
        # confined: that would show the protected tree's name only, never its files)
        readable += confine.allow_list(protected, roots=[folder])
        _list_for_imports(folder)
    # /dev/shm only where CUDA may need it: its files outlive the worker, and a grade could leave some for the
    # next (in a warm session, another student's) or fill the machine's memory with them
    abi = confine.restrict_filesystem(protected, readable, [config["cwd"]], shm=config.get("device") == "cuda",
                                      roots=confine.readable_roots(config.get("started_in", "")))
    filtered = confine.seccomp(threads=False)
    return {"filesystem": abi > 0, "processes": filtered, "threads": filtered,
            "signals": filtered or abi >= 6, "landlock_abi": abi}


EXTRA_FDS = 64  # descriptors a submission may open: each pipe or socket holds a few MB the memory limit misses


def _bound_kernel_memory() -> None:
    """Memory a worker can hold outside its address space (RLIMIT_AS) comes through descriptors: socket and
    pipe buffers. Bound how many it may open, and give up the capabilities that let root grow those buffers
    or raise its own limits (memfd_create, the other way, is refused by seccomp)."""
    from torchcode.grader import confine

    try:
        n = len(os.listdir("/proc/self/fd")) + EXTRA_FDS  # what the device opened, and some
    except OSError:
        n = 256
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or n < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(n, soft) if soft != resource.RLIM_INFINITY else n, n))
    if os.geteuid() == 0 or _holds_capabilities():
        confine.drop_capabilities()


def _holds_capabilities() -> bool:
    try:
        with open("/proc/self/status") as f:
            return any(int(line.split()[1], 16) for line in f if line.startswith("CapEff"))
    except (OSError, ValueError, IndexError):
        return False


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

"""Kernel-enforced confinement of the worker, without root or containers (Linux).

- ``restrict_filesystem``: Landlock. The worker may read the system, Python and its
  packages and loaded libraries (``readable_roots``), and its own folder, *except* the
  directories it names as protected (torchcode's own package with the reference
  solutions, every problem pack, the progress store), may write only in its scratch
  directory, and reaches no device but the harmless ones (null, zero, random; shm on CUDA) and
  the GPU's: no terminal. Landlock is allow-list only, so the allow-list is built by
  walking from each root and allowing every sibling of the paths that lead to a protected one;
  symlinks are never followed (a rule added through ``lib64 -> lib`` would open all of
  ``lib``). A Landlock-confined process cannot ptrace (or read the memory of) a process
  outside its domain, such as the trusted grader, and from ABI 6 on it cannot signal one
  or connect to its abstract unix sockets either.
- ``seccomp``: a filter that kills the process on any system call made through another
  architecture's entry point (``int 0x80``, x32), makes fork, vfork, clone, clone3 and
  execve fail (threads too, once the worker's own exist), refuses every new socket and connect but a
  stream socketpair (no network, no unix socket of another program: Landlock does not cover those),
  memfd_create and memfd_secret, System V IPC and the key store (memory outside the limits, kernel
  objects that outlive the worker) and io_uring (operations the filter never sees), and lets the
  worker signal nobody but itself, nor change another process's limits, priority or CPUs, nor make itself
  not dumpable (which would hide its /proc entries from a grader not running as root), on any kernel.
- ``drop_capabilities``: a worker started by root gives up every capability, so it can neither
  raise its own limits nor force kernel buffers (sockets, pipes) past their usual sizes.

Each reports what is in force; where the kernel lacks a feature, nothing happens and the
caller reports it.
"""

from __future__ import annotations

import ctypes
import os
import platform
import stat
import struct

_libc = None


def _syscall():
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.syscall.restype = ctypes.c_long
    return _libc


# -- seccomp -------------------------------------------------------------------------------
PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
RET_KILL_PROCESS = 0x80000000
RET_ALLOW = 0x7FFF0000
RET_ERRNO = 0x00050000
EPERM, EACCES, ENOSYS = 1, 13, 38
AF_UNIX = 1
SOCK_NOT_STREAM = 0xE  # a socket type's low bits other than SOCK_STREAM's (1): dgram 2, raw 3, seqpacket 5...
CLONE_THREAD = 0x00010000
X32_BIT = 0x40000000
F_SETOWN, F_SETSIG, F_SETOWN_EX = 8, 10, 15  # fcntl commands that direct SIGIO/SIGURG at a process
FIOSETOWN, SIOCSPGRP = 0x8901, 0x8902  # their ioctl twins

# Per architecture: AUDIT_ARCH, whether x32 numbers exist, and the system calls by name.
ARCHES = {
    "x86_64": (0xC000003E, True, {
        "fork": 57, "vfork": 58, "execve": 59, "execveat": 322, "clone": 56, "clone3": 435,
        "kill": 62, "tkill": 200, "tgkill": 234, "rt_sigqueueinfo": 129, "rt_tgsigqueueinfo": 297,
        "pidfd_send_signal": 424, "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311,
        "fcntl": 72, "ioctl": 16, "socket": 41, "socketpair": 53, "connect": 42, "memfd_create": 319,
        "memfd_secret": 447, "capset": 126, "prctl": 157,
        "shmget": 29, "shmat": 30, "shmctl": 31, "shmdt": 67, "semget": 64, "semop": 65, "semctl": 66,
        "semtimedop": 220, "msgget": 68, "msgsnd": 69, "msgrcv": 70, "msgctl": 71,
        "add_key": 248, "request_key": 249, "keyctl": 250,
        "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
        "prlimit64": 302, "sched_setaffinity": 203, "sched_setscheduler": 144, "sched_setparam": 142,
        "sched_setattr": 314, "migrate_pages": 256, "move_pages": 279, "setpriority": 141, "ioprio_set": 251,
        "chmod": 90, "fchmod": 91, "fchmodat": 268, "fchmodat2": 452, "chown": 92, "fchown": 93, "lchown": 94,
        "fchownat": 260, "utime": 132, "utimes": 235, "futimesat": 261, "utimensat": 280, "setxattr": 188,
        "lsetxattr": 189, "fsetxattr": 190, "removexattr": 197, "lremovexattr": 198, "fremovexattr": 199}),
    "aarch64": (0xC00000B7, False, {
        "execve": 221, "execveat": 281, "clone": 220, "clone3": 435,
        "kill": 129, "tkill": 130, "tgkill": 131, "rt_sigqueueinfo": 138, "rt_tgsigqueueinfo": 240,
        "pidfd_send_signal": 424, "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271,
        "fcntl": 25, "ioctl": 29, "socket": 198, "socketpair": 199, "connect": 203, "memfd_create": 279,
        "memfd_secret": 447, "capset": 91, "prctl": 167,
        "msgget": 186, "msgctl": 187, "msgrcv": 188, "msgsnd": 189, "semget": 190, "semctl": 191,
        "semtimedop": 192, "semop": 193, "shmget": 194, "shmctl": 195, "shmat": 196, "shmdt": 197,
        "add_key": 217, "request_key": 218, "keyctl": 219,
        "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
        "prlimit64": 261, "sched_setaffinity": 122, "sched_setscheduler": 119, "sched_setparam": 118,
        "sched_setattr": 274, "migrate_pages": 238, "move_pages": 239, "setpriority": 140, "ioprio_set": 30,
        "fchmod": 52, "fchmodat": 53, "fchmodat2": 452, "fchownat": 54, "fchown": 55, "utimensat": 88,
        "setxattr": 5, "lsetxattr": 6, "fsetxattr": 7, "removexattr": 14, "lremovexattr": 15, "fremovexattr": 16}),
}
_LD, _JEQ, _JSET, _JGE, _RET = 0x20, 0x15, 0x45, 0x35, 0x06
_ARCH, _NR = 4, 0


def _arg(i: int) -> int:
    return 16 + 8 * i  # low 32 bits of argument i (little-endian); the kernel reads int arguments from them


class _Prog:
    """A tiny BPF assembler: ``jeq(k, label)`` jumps to a label when A == k, else falls through."""

    def __init__(self):
        self.ops: list[tuple] = []

    def ld(self, off):
        self.ops.append(("ld", off))

    def jeq(self, k, label):
        self.ops.append(("jeq", k, label))

    def jge(self, k, label):
        self.ops.append(("jge", k, label))

    def jset(self, k, label):
        self.ops.append(("jset", k, label))

    def ret(self, k):
        self.ops.append(("ret", k))

    def label(self, name):
        self.ops.append(("label", name))

    def assemble(self) -> bytes:
        where, n = {}, 0
        for op in self.ops:
            if op[0] == "label":
                where[op[1]] = n
            else:
                n += 1
        out, pc = [], 0
        for op in self.ops:
            kind = op[0]
            if kind == "label":
                continue
            if kind == "ld":
                out.append(struct.pack("HBBI", _LD, 0, 0, op[1]))
            elif kind == "ret":
                out.append(struct.pack("HBBI", _RET, 0, 0, op[1]))
            else:
                code = {"jeq": _JEQ, "jge": _JGE, "jset": _JSET}[kind]
                jt = where[op[2]] - pc - 1
                if not 0 <= jt < 256:
                    raise ValueError("seccomp jump out of range")
                out.append(struct.pack("HBBI", code, jt, 0, op[1] & 0xFFFFFFFF))
            pc += 1
        return b"".join(out)


def _load(prog: bytes) -> bool:
    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    buf = ctypes.create_string_buffer(prog)
    fprog = SockFprog(len(prog) // 8, ctypes.cast(buf, ctypes.c_void_p))
    libc = _syscall()
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return False
    return libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) == 0


# Kernel objects that no path names, so Landlock never sees them, and that outlive the worker: System V shared
# memory (attached, written and detached again it is memory no address-space limit counts), semaphores and
# message queues, and the kernel's key store. Each is also a channel from one grade to the next (another
# student's, in `torchcode grade`).
SHARED_STATE = ("shmget", "shmat", "shmctl", "shmdt", "semget", "semop", "semctl", "semtimedop",
                "msgget", "msgsnd", "msgrcv", "msgctl", "add_key", "request_key", "keyctl")
# io_uring runs its operations (making a socket among them) without passing them through this filter.
IO_URING = ("io_uring_setup", "io_uring_enter", "io_uring_register")
# Calls that change another process of the same user, no signal or ptrace needed: the trusted grader's resource
# limits (a CPU-time limit it has already spent kills it), its priority, its CPUs, its memory's placement.
# Allowed on the worker itself only (pid 0 or its own); setpriority and ioprio_set name a process by (which, who).
OWN_PROCESS_ONLY = ("prlimit64", "sched_setaffinity", "sched_setscheduler", "sched_setparam", "sched_setattr",
                    "migrate_pages", "move_pages")
PRIO_PROCESS, IOPRIO_WHO_PROCESS = 0, 1
# Calls that change a file's permissions, owner, times or extended attributes: Landlock has no right for them (at
# any ABI), so they would reach every file of the user's, however far outside the sandbox (a chmod 000 of the
# class folder failed every later student in `grade`; touching the learner's own file restarted `watch` forever).
# A submission never needs them, in its scratch folder either.
FILE_ATTRIBUTES = ("chmod", "fchmod", "fchmodat", "fchmodat2", "chown", "fchown", "lchown", "fchownat", "utime",
                   "utimes", "futimesat", "utimensat", "setxattr", "lsetxattr", "fsetxattr", "removexattr",
                   "lremovexattr", "fremovexattr")
# prctl(PR_SET_DUMPABLE, 0) would make the worker's /proc entries (its open files, its mappings) readable by root
# only: a grader not running as root could no longer watch the files it keeps open after deleting them.
PR_SET_DUMPABLE = 4


def seccomp_program(machine: str, pid: int, threads: bool) -> bytes | None:
    """The filter for this architecture, or None where we have no syscall table for it.

    ``pid`` is the worker's own pid (signals may go there only); ``threads`` whether
    clone(CLONE_THREAD) is still allowed.
    """
    arch = ARCHES.get(machine)
    if arch is None:
        return None
    audit, has_x32, nr = arch
    p = _Prog()
    p.ld(_ARCH)
    p.jeq(audit, "native")
    p.ret(RET_KILL_PROCESS)  # int 0x80 on x86_64, or any other foreign entry point
    p.label("native")
    p.ld(_NR)
    if has_x32:
        p.jge(X32_BIT, "kill")
    for name in ("fork", "vfork", "execve", "execveat", "tkill", "pidfd_send_signal", "ptrace",
                 "process_vm_readv", "process_vm_writev", "memfd_create", "memfd_secret", *SHARED_STATE, *IO_URING,
                 *FILE_ATTRIBUTES):
        if name in nr:
            p.jeq(nr[name], "eperm")
    p.jeq(nr["clone3"], "enosys")  # glibc then falls back to clone, which we can inspect
    p.jeq(nr["clone"], "clone")
    p.jeq(nr["kill"], "kill_pid")
    for name in ("tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo"):
        p.jeq(nr[name], "own_pid")
    p.jeq(nr["fcntl"], "fcntl")
    p.jeq(nr["ioctl"], "ioctl")
    p.jeq(nr["socket"], "socket")
    p.jeq(nr["connect"], "eperm")
    p.jeq(nr["socketpair"], "socketpair")
    for name in OWN_PROCESS_ONLY:
        p.jeq(nr[name], "own_or_zero")
    p.jeq(nr["setpriority"], "setpriority")
    p.jeq(nr["prctl"], "prctl")
    p.jeq(nr["ioprio_set"], "ioprio_set")
    p.ret(RET_ALLOW)

    p.label("prctl")
    p.ld(_arg(0))
    p.jeq(PR_SET_DUMPABLE, "eperm")
    p.ret(RET_ALLOW)

    p.label("setpriority")  # setpriority(which, who, ...): a process, itself
    p.ld(_arg(0))
    p.jeq(PRIO_PROCESS, "who_is_own")
    p.ret(RET_ERRNO | EPERM)
    p.label("ioprio_set")
    p.ld(_arg(0))
    p.jeq(IOPRIO_WHO_PROCESS, "who_is_own")
    p.ret(RET_ERRNO | EPERM)
    p.label("who_is_own")
    p.ld(_arg(1))
    p.jeq(0, "allow")
    p.jeq(pid, "allow")
    p.ret(RET_ERRNO | EPERM)

    p.label("own_or_zero")  # the first argument is a pid: 0 (itself) or its own
    p.ld(_arg(0))
    p.jeq(0, "allow")
    p.jeq(pid, "allow")
    p.ret(RET_ERRNO | EPERM)

    # No new socket (the worker keeps the one it was given), nor any connect: no network (a submission could send
    # away what it may read), and no unix socket of another program, which Landlock does not cover (a desktop's
    # D-Bus session bus starts any command outside the sandbox, docker.sock any container). A socketpair is
    # harmless, but only a stream pair: a datagram socket can send to any socket's path (sendto, sendmsg).
    p.label("socket")
    p.ret(RET_ERRNO | EACCES)
    p.label("socketpair")
    p.ld(_arg(1))
    p.jset(SOCK_NOT_STREAM, "eperm")
    p.ret(RET_ALLOW)

    p.label("clone")
    p.ld(_arg(0))
    p.jset(CLONE_THREAD, "thread")
    p.ret(RET_ERRNO | EPERM)
    p.label("thread")
    p.ret(RET_ALLOW if threads else RET_ERRNO | EPERM)

    p.label("kill_pid")  # kill(pid), kill(0) and kill(-pid): itself or its own process group
    p.ld(_arg(0))
    p.jeq(0, "allow")
    p.jeq(-pid, "allow")
    p.label("own_pid")
    p.ld(_arg(0))
    p.jeq(pid, "allow")
    p.ret(RET_ERRNO | EPERM)

    p.label("fcntl")
    p.ld(_arg(1))
    for cmd in (F_SETOWN, F_SETSIG, F_SETOWN_EX):
        p.jeq(cmd, "eperm")
    p.ret(RET_ALLOW)
    p.label("ioctl")
    p.ld(_arg(1))
    for cmd in (FIOSETOWN, SIOCSPGRP):
        p.jeq(cmd, "eperm")
    p.ret(RET_ALLOW)

    p.label("allow")
    p.ret(RET_ALLOW)
    p.label("eperm")
    p.ret(RET_ERRNO | EPERM)
    p.label("enosys")
    p.ret(RET_ERRNO | ENOSYS)
    p.label("kill")
    p.ret(RET_KILL_PROCESS)
    return p.assemble()


def seccomp(threads: bool = False) -> bool:
    """No new processes (nor threads unless ``threads``), no foreign syscall ABIs, signals to itself only."""
    if not hasattr(os, "fork") or platform.system() != "Linux":
        return False
    prog = seccomp_program(platform.machine(), os.getpid(), threads)
    return prog is not None and _load(prog)


def drop_capabilities() -> bool:
    """Give up every capability (effective, permitted, inheritable): what root keeps after this is its uid.
    Without CAP_SYS_RESOURCE and CAP_NET_ADMIN a process cannot raise its rlimits, grow a pipe past
    pipe-max-size nor force a socket's buffer past wmem_max (memory its address-space limit does not count).
    True when the process holds none afterwards (also when it held none)."""
    arch = ARCHES.get(platform.machine())
    if arch is None or platform.system() != "Linux":
        return False
    header = struct.pack("Ii", 0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = bytes(24)  # two {effective, permitted, inheritable} words, all zero
    if _syscall().syscall(ctypes.c_long(arch[2]["capset"]), ctypes.c_char_p(header), ctypes.c_char_p(data)) != 0:
        return False
    try:
        with open("/proc/self/status") as f:
            return all(int(line.split()[1], 16) == 0 for line in f if line.startswith(("CapEff", "CapPrm")))
    except (OSError, ValueError, IndexError):
        return False


# -- Landlock ------------------------------------------------------------------------------
SYS_CREATE, SYS_ADD, SYS_RESTRICT = 444, 445, 446
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
TRUNCATE, IOCTL_DEV = 1 << 14, 1 << 15
READ = EXECUTE | READ_FILE | READ_DIR
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV  # rights that apply to a file
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1

# Devices the worker may use: the harmless ones, shared memory, and the GPU's (CUDA may open
# them at any time). Nothing else under /dev: no terminal, no /dev/pts, no /dev/tty.
DEVICES_RW = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")
DEVICES_GPU_PREFIXES = ("nvidia",)
DEVICES_GPU_DIRS = ("/dev/dri", "/dev/nvidia-caps")


def _abi() -> int:
    if platform.system() != "Linux":
        return 0
    v = _syscall().syscall(SYS_CREATE, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    return int(v) if v > 0 else 0


def _handled(abi: int) -> int:
    rights = (1 << 13) - 1
    if abi >= 2:
        rights |= 1 << 13  # refer
    if abi >= 3:
        rights |= TRUNCATE
    if abi >= 5:
        rights |= IOCTL_DEV
    return rights


def _under(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")


# What a worker reads besides its own file and folder (``readable_roots``): the system, Python and its
# packages, the libraries it loaded or may load. Not the home directory, /tmp, other users' or the
# directory the grader started in: in `torchcode grade` a submission would print the instructor's files
# into the feedback its student gets back.
SYSTEM_ROOTS = ("/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/etc", "/proc", "/sys")
LIBRARY_PATH_VARS = ("LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH", "CUDA_ROOT")


def _mapped_dirs() -> list[str]:
    """The folders of every file mapped into this process (shared libraries: torch's, CUDA's, Python's)."""
    found = set()
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split(None, 5)
                if len(parts) == 6 and parts[5].startswith("/") and not parts[5].rstrip().endswith("(deleted)"):
                    found.add(os.path.dirname(parts[5].rstrip("\n")))
    except OSError:
        pass
    return sorted(found)


def readable_roots(start_dir: str) -> list[str]:
    """The real paths a confined worker may read (protected trees inside them excepted, see ``allow_list``).

    ``start_dir``: the directory the grader was started in (``python -m`` puts it on sys.path); it is a
    user's folder, not a package location, so it is left out, as are the home directory and its parents."""
    import sys

    home = os.path.realpath(os.path.expanduser("~"))
    start = os.path.realpath(start_dir) if start_dir else ""
    wanted = list(SYSTEM_ROOTS) + [sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix]
    wanted += [p for p in sys.path if p]
    wanted += [p for v in LIBRARY_PATH_VARS for p in os.environ.get(v, "").split(":") if p]
    wanted += _mapped_dirs()
    roots: set[str] = set()
    for p in wanted:
        r = os.path.realpath(p)
        if r in ("/", start) or _under(home, r) or not os.path.exists(r):
            continue
        if r.startswith(("/dev/", "/tmp/")) and r not in sys.path and not r.startswith(sys.prefix):
            continue  # a library mapped from /dev/shm or a temporary file: nothing to read there later
        roots.add(r)
    return sorted(r for r in roots if not any(q != r and _under(r, q) for q in roots))


def allow_list(protected: list[str], fenced: tuple[str, ...] = ("/dev",), roots: list[str] | None = None) -> list[str]:
    """Paths to allow so that everything under ``roots`` (default: everything) is readable except the
    protected trees and ``fenced`` ones.

    Only real directories are walked and symlinks are never allowed: a symlink's target is
    reached (and allowed, or not) under its own real path.
    """
    protected = [os.path.realpath(p) for p in protected if p]
    allowed: list[str] = []

    def walk(d: str) -> None:
        try:
            entries = os.listdir(d)
        except OSError:
            return
        for name in entries:
            p = os.path.join(d, name)
            try:
                st = os.lstat(p)
            except OSError:
                continue
            if stat.S_ISLNK(st.st_mode) or p in fenced:
                continue
            if any(_under(p, q) for q in protected):
                continue  # a protected tree
            if stat.S_ISDIR(st.st_mode) and any(_under(q, p) for q in protected):
                walk(p)  # leads to a protected tree: descend and allow its other branches
            else:
                allowed.append(p)

    if roots is None:
        walk("/")
        return allowed
    for root in roots:
        if any(_under(root, q) for q in protected) or any(_under(root, f) for f in fenced):
            continue
        if any(_under(q, root) for q in protected):
            walk(root)  # leads to a protected tree: its other branches only
        else:
            allowed.append(root)
    return allowed


def devices(shm: bool = True) -> list[tuple[str, int]]:
    """The device rules: (path, rights). ``shm``: ``/dev/shm`` is writable (a scratch directory shared
    with every process, whose files outlive the worker: left for CUDA only); else out of reach (it holds the
    shared memory of the user's other programs, a browser's among them, which a CPU worker has no use for)."""
    rules = [(d, READ_FILE | WRITE_FILE) for d in DEVICES_RW]
    if shm:
        rules.append(("/dev/shm", -1))  # -1: every right
    gpu = READ_FILE | WRITE_FILE | IOCTL_DEV
    try:
        names = os.listdir("/dev")
    except OSError:
        names = []
    rules += [(os.path.join("/dev", n), gpu) for n in sorted(names) if n.startswith(DEVICES_GPU_PREFIXES)]
    rules += [(d, gpu | READ_DIR) for d in DEVICES_GPU_DIRS]
    return rules


def restrict_filesystem(protected: list[str], readable: list[str], writable: list[str], shm: bool = True,
                        roots: list[str] | None = None) -> int:
    """Read under ``roots`` (default: everywhere) but not ``protected`` (``readable`` paths are allowed even
    inside it); write only in ``writable``; the devices of ``devices(shm)`` only. Returns the Landlock ABI in
    force, 0 if none.

    From ABI 6 on, the worker also may not signal processes outside its domain (the grader) nor
    connect to their abstract unix sockets.
    """
    abi = _abi()
    if abi < 1:
        return 0
    libc = _syscall()
    handled = _handled(abi)
    scoped = SCOPE_SIGNAL | SCOPE_ABSTRACT_UNIX_SOCKET if abi >= 6 else 0
    attr = struct.pack("QQQ", handled, 0, scoped) if abi >= 6 else struct.pack("Q", handled)
    ruleset = libc.syscall(SYS_CREATE, ctypes.c_char_p(attr), ctypes.c_size_t(len(attr)), ctypes.c_uint32(0))
    if ruleset < 0:
        return 0

    def add(path: str, rights: int) -> None:
        try:  # O_NOFOLLOW: a rule never lands on a symlink's target
            fd = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return
        try:
            st = os.fstat(fd)
            if stat.S_ISLNK(st.st_mode):
                return
            if not stat.S_ISDIR(st.st_mode):
                rights &= FILE_RIGHTS
            rule = struct.pack("=Qi", rights & handled, fd)
            libc.syscall(SYS_ADD, ctypes.c_int(ruleset), ctypes.c_int(1), ctypes.c_char_p(rule), ctypes.c_uint32(0))
        finally:
            os.close(fd)

    try:
        for p in allow_list(protected, roots=roots):
            add(p, READ)
        for p, rights in devices(shm):
            add(p, handled if rights == -1 else rights)
        for p in readable:
            add(os.path.realpath(p), READ)
        for p in writable:
            add(os.path.realpath(p), handled)
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            return 0
        return abi if libc.syscall(SYS_RESTRICT, ctypes.c_int(ruleset), ctypes.c_uint32(0)) == 0 else 0
    finally:
        os.close(ruleset)

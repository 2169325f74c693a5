"""Kernel-enforced confinement of the worker, without root or containers (Linux).

- ``no_new_processes``: a seccomp filter that makes fork, vfork, clone without
  CLONE_THREAD, clone3 and execve fail. Threads still work (torch needs them); a fork
  bomb or a subprocess gets an error instead of a machine full of processes.
- ``restrict_filesystem``: Landlock. The worker may read everything *except* the
  directories it names as protected (torchcode's own package with the reference
  solutions, every problem pack, the progress store), and may write only in its
  scratch directory. Landlock is allow-list only, so the allow-list is built by
  walking from / and allowing every sibling of the paths that lead to a protected one.
  A Landlock-confined process also cannot ptrace (or read the memory of) a process
  outside its domain, such as the trusted grader.

Each returns whether it is in force; where the kernel lacks the feature, nothing
happens and the caller reports it.
"""

from __future__ import annotations

import ctypes
import os
import platform
import struct

_libc = None


def _syscall():
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    return _libc


PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
RET_ALLOW = 0x7FFF0000
RET_ERRNO = 0x00050000
EPERM, ENOSYS = 1, 38
CLONE_THREAD = 0x00010000
ARCHES = {  # AUDIT_ARCH, syscall numbers to refuse outright, clone, clone3
    "x86_64": (0xC000003E, {57: EPERM, 58: EPERM, 59: EPERM, 322: EPERM}, 56, 435),  # fork vfork execve execveat
    "aarch64": (0xC00000B7, {221: EPERM, 281: EPERM}, 220, 435),  # execve execveat
}


def _bpf(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("HBBI", code, jt, jf, k)


def no_new_processes() -> bool:
    arch = ARCHES.get(platform.machine())
    if arch is None or not hasattr(os, "fork"):
        return False
    audit, refuse, clone, clone3 = arch
    LD, JEQ, JSET, RET = 0x20, 0x15, 0x45, 0x06
    prog = [_bpf(LD, 0, 0, 4), _bpf(JEQ, 1, 0, audit), _bpf(RET, 0, 0, RET_ALLOW), _bpf(LD, 0, 0, 0)]
    for nr, err in refuse.items():
        prog += [_bpf(JEQ, 0, 1, nr), _bpf(RET, 0, 0, RET_ERRNO | err)]
    prog += [_bpf(JEQ, 0, 1, clone3), _bpf(RET, 0, 0, RET_ERRNO | ENOSYS)]  # glibc falls back to clone
    prog += [_bpf(JEQ, 0, 3, clone), _bpf(LD, 0, 0, 16), _bpf(JSET, 1, 0, CLONE_THREAD),
             _bpf(RET, 0, 0, RET_ERRNO | EPERM)]
    prog += [_bpf(RET, 0, 0, RET_ALLOW)]
    filt = ctypes.create_string_buffer(b"".join(prog))

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = SockFprog(len(prog), ctypes.cast(filt, ctypes.c_void_p))
    libc = _syscall()
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return False
    return libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) == 0


# -- Landlock ------------------------------------------------------------------------------
SYS_CREATE, SYS_ADD, SYS_RESTRICT = 444, 445, 446
READ = (1 << 0) | (1 << 2) | (1 << 3)  # execute, read file, read dir
FILE_RIGHTS = (1 << 0) | (1 << 1) | (1 << 2) | (1 << 14) | (1 << 15)  # rights that apply to a file


def _abi() -> int:
    if platform.system() != "Linux":
        return 0
    libc = _syscall()
    libc.syscall.restype = ctypes.c_long
    v = libc.syscall(SYS_CREATE, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    return int(v) if v > 0 else 0


def _handled(abi: int) -> int:
    rights = (1 << 13) - 1
    if abi >= 2:
        rights |= 1 << 13  # refer
    if abi >= 3:
        rights |= 1 << 14  # truncate
    if abi >= 5:
        rights |= 1 << 15  # ioctl on devices
    return rights


def allow_list(protected: list[str]) -> list[str]:
    """Paths to allow so that everything is readable except the protected trees."""
    protected = [os.path.realpath(p) for p in protected if p]
    allowed: list[str] = []

    def walk(d: str) -> None:
        try:
            entries = os.listdir(d)
        except OSError:
            return
        for name in entries:
            p = os.path.join(d, name)
            real = os.path.realpath(p)
            if any(real == q or real.startswith(q.rstrip("/") + "/") for q in protected):
                continue  # a protected tree, or a symlink into one
            if any(q.startswith(real.rstrip("/") + "/") for q in protected) and os.path.isdir(real) and real == p:
                walk(p)  # leads to a protected tree: descend and allow its other branches
            else:
                allowed.append(p)

    walk("/")
    return allowed


def restrict_filesystem(protected: list[str], readable: list[str], writable: list[str]) -> bool:
    """Read everywhere but ``protected`` (``readable`` files are allowed even inside it); write only in ``writable``."""
    abi = _abi()
    if abi < 1:
        return False
    libc = _syscall()
    handled = _handled(abi)
    attr = struct.pack("Q", handled)
    ruleset = libc.syscall(SYS_CREATE, ctypes.c_char_p(attr), ctypes.c_size_t(len(attr)), ctypes.c_uint32(0))
    if ruleset < 0:
        return False

    def add(path: str, rights: int) -> None:
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            return
        try:
            if not os.path.isdir(path):
                rights &= FILE_RIGHTS
            rule = struct.pack("=Qi", rights & handled, fd)
            libc.syscall(SYS_ADD, ctypes.c_int(ruleset), ctypes.c_int(1), ctypes.c_char_p(rule), ctypes.c_uint32(0))
        finally:
            os.close(fd)

    try:
        for p in allow_list(protected):
            add(p, READ | ((1 << 1) | (1 << 15) if p == "/dev" else 0))
        for p in readable:
            add(p, READ)
        for p in writable:
            add(p, handled)
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            return False
        return libc.syscall(SYS_RESTRICT, ctypes.c_int(ruleset), ctypes.c_uint32(0)) == 0
    finally:
        os.close(ruleset)

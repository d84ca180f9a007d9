"""The raw system calls: ``bpf(2)``, ``perf_event_open(2)`` and ``ioctl(2)``
through libc's ``syscall``, and :func:`retry`, the one loop that issues a
call again after ``EINTR`` (or ``EAGAIN``) for every caller.

Each raw call returns the kernel's non-negative result or ``-errno``; it never
raises for a kernel error. The rest of :mod:`bpfmux.live.sys` reads them as
attributes of this module at call time (``raw.raw_bpf(...)``), so a test can
replace :func:`raw_bpf`, :func:`raw_perf_event_open` or :func:`raw_ioctl` here
(``monkeypatch.setattr(bpfmux.live.sys.raw, "raw_bpf", fake)``) and exercise
the whole layer without a kernel.
"""

from __future__ import annotations

import ctypes
import errno as _errno
import os
from collections.abc import Callable, Collection

from ...errors import NotSupportedError

__all__ = ["SYSCALL_NUMBERS", "raw_bpf", "raw_ioctl", "raw_perf_event_open", "retry", "syscall_number"]

#: ``__NR_bpf`` and ``__NR_perf_event_open`` per ``os.uname().machine``.
SYSCALL_NUMBERS: dict[str, dict[str, int]] = {
    "x86_64": {"bpf": 321, "perf_event_open": 298},
    "aarch64": {"bpf": 280, "perf_event_open": 241},
    "riscv64": {"bpf": 280, "perf_event_open": 241},
    "ppc64le": {"bpf": 361, "perf_event_open": 319},
    "s390x": {"bpf": 351, "perf_event_open": 331},
}

_libc = ctypes.CDLL(None, use_errno=True)
_syscall = _libc.syscall
_syscall.restype = ctypes.c_long
_ioctl = _libc.ioctl
_ioctl.restype = ctypes.c_int
_ioctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p]


def syscall_number(name: str) -> int:
    """The number of system call ``name`` (``"bpf"``, ``"perf_event_open"``) on this machine.

    :raises NotSupportedError: bpfmux does not know this architecture.
    """
    table = SYSCALL_NUMBERS.get(os.uname().machine)
    if table is None:
        raise NotSupportedError(name, f"bpfmux does not know the {name} syscall number on {os.uname().machine}")
    return table[name]


def raw_bpf(cmd: int, attr_addr: int, size: int) -> int:
    """``syscall(__NR_bpf, cmd, attr, size)``; returns the result or ``-errno``.

    :raises NotSupportedError: bpfmux does not know this architecture.
    """
    ret = _syscall(ctypes.c_long(syscall_number("bpf")), ctypes.c_int(cmd), ctypes.c_void_p(attr_addr), ctypes.c_uint(size))
    return -ctypes.get_errno() if ret < 0 else ret


def raw_perf_event_open(attr_addr: int, pid: int, cpu: int, group_fd: int, flags: int) -> int:
    """``syscall(__NR_perf_event_open, ...)``; returns the fd or ``-errno``.

    :raises NotSupportedError: bpfmux does not know this architecture.
    """
    ret = _syscall(
        ctypes.c_long(syscall_number("perf_event_open")),
        ctypes.c_void_p(attr_addr),
        ctypes.c_int(pid),
        ctypes.c_int(cpu),
        ctypes.c_int(group_fd),
        ctypes.c_ulong(flags),
    )
    return -ctypes.get_errno() if ret < 0 else ret


def raw_ioctl(fd: int, request: int, arg: int) -> int:
    """``ioctl(fd, request, arg)``; returns the result or ``-errno``."""
    ret = _ioctl(fd, request, ctypes.c_void_p(arg))
    return -ctypes.get_errno() if ret < 0 else ret



def retry(call: Callable[[], int], again: Collection[int] = (_errno.EINTR,), attempts: int | None = None) -> int:
    """Issue ``call`` (a raw call: a result or ``-errno``) again while it fails
    with an errno in ``again``, at most ``attempts`` times in all (``None``: no
    limit).

    :returns: the first result that is not such a failure, or the last one
        once the attempts are used up.
    :raises Exception: whatever ``call`` raises (a raw call raises only
        :class:`~bpfmux.errors.NotSupportedError` on an unknown architecture).
    """
    tries = 0
    while True:
        ret = call()
        tries += 1
        if ret >= 0 or -ret not in again or (attempts is not None and tries >= attempts):
            return ret

"""``perf_event_open(2)`` and the perf-event ioctls BPF needs (enable,
disable, ``SET_BPF``, ``QUERY_BPF``, ``ID``), with the flag and sample-type
bits of ``struct perf_event_attr`` (:class:`~bpfmux.live.sys.types.PerfEventAttr`).

The openers for tracepoints, probes and sampling events are in
:mod:`bpfmux.live.perf`, on top of these.
"""

from __future__ import annotations

import ctypes
import enum
import errno as _errno

from . import raw as _raw
from .errors import error
from .fds import Fd, fdnum
from .types import PerfEventAttr, PerfEventQueryBpf, u32

__all__ = [
    "PERF_EVENT_IOC_DISABLE",
    "PERF_EVENT_IOC_ENABLE",
    "PERF_EVENT_IOC_ID",
    "PERF_EVENT_IOC_PAUSE_OUTPUT",
    "PERF_EVENT_IOC_PERIOD",
    "PERF_EVENT_IOC_QUERY_BPF",
    "PERF_EVENT_IOC_REFRESH",
    "PERF_EVENT_IOC_RESET",
    "PERF_EVENT_IOC_SET_BPF",
    "PERF_EVENT_IOC_SET_FILTER",
    "PERF_EVENT_IOC_SET_OUTPUT",
    "PERF_FLAG_FD_CLOEXEC",
    "PERF_FLAG_FD_NO_GROUP",
    "PERF_FLAG_FD_OUTPUT",
    "PERF_FLAG_PID_CGROUP",
    "PerfFlag",
    "PerfSample",
    "perf_event_disable",
    "perf_event_enable",
    "perf_event_id",
    "perf_event_open",
    "perf_event_query_bpf",
    "perf_event_set_bpf",
    "perf_ioctl",
]


class PerfFlag(enum.IntFlag):
    """Bits of ``perf_event_attr``'s bit-field word."""

    DISABLED = 1 << 0
    INHERIT = 1 << 1
    PINNED = 1 << 2
    EXCLUSIVE = 1 << 3
    EXCLUDE_USER = 1 << 4
    EXCLUDE_KERNEL = 1 << 5
    EXCLUDE_HV = 1 << 6
    EXCLUDE_IDLE = 1 << 7
    MMAP = 1 << 8
    COMM = 1 << 9
    FREQ = 1 << 10
    INHERIT_STAT = 1 << 11
    ENABLE_ON_EXEC = 1 << 12
    TASK = 1 << 13
    WATERMARK = 1 << 14
    MMAP_DATA = 1 << 17
    SAMPLE_ID_ALL = 1 << 18
    EXCLUDE_HOST = 1 << 19
    EXCLUDE_GUEST = 1 << 20
    EXCLUDE_CALLCHAIN_KERNEL = 1 << 21
    EXCLUDE_CALLCHAIN_USER = 1 << 22
    MMAP2 = 1 << 23
    COMM_EXEC = 1 << 24
    USE_CLOCKID = 1 << 25
    CONTEXT_SWITCH = 1 << 26
    WRITE_BACKWARD = 1 << 27
    NAMESPACES = 1 << 28
    KSYMBOL = 1 << 29
    BPF_EVENT = 1 << 30
    AUX_OUTPUT = 1 << 31
    CGROUP = 1 << 32
    TEXT_POKE = 1 << 33
    BUILD_ID = 1 << 34
    INHERIT_THREAD = 1 << 35
    REMOVE_ON_EXEC = 1 << 36
    SIGTRAP = 1 << 37


class PerfSample(enum.IntFlag):
    """``enum perf_event_sample_format`` (``sample_type`` bits)."""

    IP = 1 << 0
    TID = 1 << 1
    TIME = 1 << 2
    ADDR = 1 << 3
    READ = 1 << 4
    CALLCHAIN = 1 << 5
    ID = 1 << 6
    CPU = 1 << 7
    PERIOD = 1 << 8
    STREAM_ID = 1 << 9
    RAW = 1 << 10


#: ``perf_event_open`` flags.
PERF_FLAG_FD_NO_GROUP = 1 << 0
PERF_FLAG_FD_OUTPUT = 1 << 1
PERF_FLAG_PID_CGROUP = 1 << 2
PERF_FLAG_FD_CLOEXEC = 1 << 3


def _ioc(direction: int, nr: int, size: int) -> int:
    # _IO/_IOW/_IOR/_IOWR('$', nr, size) with the generic ioctl encoding
    return (direction << 30) | (size << 16) | (ord("$") << 8) | nr


PERF_EVENT_IOC_ENABLE = _ioc(0, 0, 0)
PERF_EVENT_IOC_DISABLE = _ioc(0, 1, 0)
PERF_EVENT_IOC_REFRESH = _ioc(0, 2, 0)
PERF_EVENT_IOC_RESET = _ioc(0, 3, 0)
PERF_EVENT_IOC_PERIOD = _ioc(1, 4, 8)
PERF_EVENT_IOC_SET_OUTPUT = _ioc(0, 5, 0)
PERF_EVENT_IOC_SET_FILTER = _ioc(1, 6, 8)
PERF_EVENT_IOC_ID = _ioc(2, 7, 8)
PERF_EVENT_IOC_SET_BPF = _ioc(1, 8, 4)
PERF_EVENT_IOC_PAUSE_OUTPUT = _ioc(1, 9, 4)
PERF_EVENT_IOC_QUERY_BPF = _ioc(3, 10, 8)


def perf_event_open(attr: PerfEventAttr, pid: int = -1, cpu: int = 0, group_fd: int = -1,
                    flags: int = PERF_FLAG_FD_CLOEXEC) -> Fd:
    """``perf_event_open(2)``; ``attr.size`` is filled in when 0.

    :returns: the perf event's fd.
    :raises BpfError: ``ENOENT``/``EINVAL`` unknown event or bad config,
        ``EACCES``/``EPERM`` check ``kernel.perf_event_paranoid`` or run as
        root, ``ENODEV``/``EOPNOTSUPP`` hardware event unavailable.
    """
    if not attr.size:
        attr.size = ctypes.sizeof(PerfEventAttr)
    addr = ctypes.addressof(attr)
    ret = _raw.retry(lambda: _raw.raw_perf_event_open(addr, pid, cpu, group_fd, flags))
    if ret < 0:
        hints = {
            _errno.ENOENT: "no such event (check the PMU type and config)",
            _errno.EINVAL: "invalid event configuration",
            _errno.EACCES: "not allowed: run as root or lower kernel.perf_event_paranoid",
            _errno.EPERM: "not allowed: run as root or lower kernel.perf_event_paranoid",
            _errno.ENODEV: "this event is not available on this machine (no such PMU)",
            _errno.EOPNOTSUPP: "this event is not supported on this machine",
        }
        raise error(f"perf_event_open(type={attr.type}, config={attr.config:#x})", -ret, hints.get(-ret, ""))
    return Fd(ret, "perf_event")


def perf_ioctl(fd: Fd | int, request: int, arg: int = 0, what: str = "perf ioctl") -> int:
    """An ioctl on a perf event fd with an integer (or pointer) argument.

    :raises BpfError: the errno of the ioctl.
    """
    ret = _raw.retry(lambda: _raw.raw_ioctl(fdnum(fd), request, arg))
    if ret < 0:
        raise error(what, -ret)
    return ret


def perf_event_enable(fd: Fd | int) -> None:
    """``PERF_EVENT_IOC_ENABLE``.

    :raises BpfError: the ioctl's errno.
    """
    perf_ioctl(fd, PERF_EVENT_IOC_ENABLE, 0, "enabling a perf event")


def perf_event_disable(fd: Fd | int) -> None:
    """``PERF_EVENT_IOC_DISABLE``.

    :raises BpfError: the ioctl's errno.
    """
    perf_ioctl(fd, PERF_EVENT_IOC_DISABLE, 0, "disabling a perf event")


def perf_event_set_bpf(fd: Fd | int, prog_fd: Fd | int) -> None:
    """``PERF_EVENT_IOC_SET_BPF``: attach a program to the perf event (the
    legacy way; the perf event owns it until closed).

    :raises BpfError: ``EEXIST`` the event already has a program, ``EINVAL``
        program type does not fit, ``E2BIG`` the hook's program array is full.
    """
    ret = _raw.raw_ioctl(fdnum(fd), PERF_EVENT_IOC_SET_BPF, fdnum(prog_fd))
    if ret < 0:
        hints = {
            _errno.EEXIST: "this perf event already has a program; open another perf event",
            _errno.E2BIG: "the hook already runs the maximum number of programs (64)",
            _errno.EINVAL: "the program type does not match the perf event",
        }
        raise error("attaching a program to a perf event", -ret, hints.get(-ret, ""))


def perf_event_query_bpf(fd: Fd | int, capacity: int = 64) -> list[int]:
    """``PERF_EVENT_IOC_QUERY_BPF``: ids of the programs on the perf event's
    hook, in run order.

    :raises BpfError: ``ENOSPC`` more programs than ``capacity`` (the message
        says how many), ``EINVAL`` not a tracing perf event.
    """
    ids_type = u32 * max(capacity, 1)
    buf = (ctypes.c_uint8 * (PerfEventQueryBpf.ids.offset + ctypes.sizeof(ids_type)))()  # header, then the ids
    q = PerfEventQueryBpf.from_buffer(buf)
    q.ids_len = capacity
    ret = _raw.raw_ioctl(fdnum(fd), PERF_EVENT_IOC_QUERY_BPF, ctypes.addressof(buf))
    if ret < 0:
        if -ret == _errno.ENOSPC:
            raise error("querying a perf event's programs", _errno.ENOSPC,
                         f"{q.prog_cnt} programs attached, more than the capacity {capacity}; pass a larger capacity")
        raise error("querying a perf event's programs", -ret)
    return list(ids_type.from_buffer(buf, PerfEventQueryBpf.ids.offset)[: q.prog_cnt])


def perf_event_id(fd: Fd | int) -> int:
    """``PERF_EVENT_IOC_ID``: the event's unique id.

    :raises BpfError: the ioctl's errno.
    """
    v = ctypes.c_uint64()
    perf_ioctl(fd, PERF_EVENT_IOC_ID, ctypes.addressof(v), "reading a perf event id")
    return v.value

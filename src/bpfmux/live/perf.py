"""perf_event_open(2) helpers: the perf events BPF programs attach through.

- tracepoints (``PERF_TYPE_TRACEPOINT``, config = the tracefs id),
- uprobes/uretprobes and kprobes/kretprobes through their dynamic PMUs
  (``/sys/bus/event_source/devices/{uprobe,kprobe}/type``; the ``retprobe``
  bit's position is read from the PMU's ``format/retprobe`` file),
- software and hardware sampling events, one per CPU.

A :class:`PerfEvent` owns its file descriptor: ``close()`` is idempotent and
also runs from the context manager. The ioctls BPF needs are methods:
:meth:`PerfEvent.set_bpf` (``PERF_EVENT_IOC_SET_BPF``),
:meth:`PerfEvent.query_bpf` (``PERF_EVENT_IOC_QUERY_BPF``, the program ids
attached to a tracepoint/kprobe/uprobe event in run order), enable/disable.
"""

from __future__ import annotations

import ctypes
import enum
import errno as _errno
import os
from functools import lru_cache

from ..errors import BpfError, NotFoundError, NotSupportedError, ParseError
from ..host import tracefs
from ..host.files import read_text
from ..uapi import PerfHwId, PerfSwId, PerfType
from . import sys as _sys

__all__ = [
    "PERF_FLAG_FD_CLOEXEC",
    "PerfEvent",
    "make_attr",
    "open_hardware",
    "open_kprobe",
    "open_software",
    "open_tracepoint",
    "open_uprobe",
    "perf_event_open",
    "pmu_format_bit",
    "pmu_type",
]

PERF_FLAG_FD_CLOEXEC = _sys.PERF_FLAG_FD_CLOEXEC

# names accepted in PerfEventAttr-building helpers' ``flags``
_FLAG_BITS = {f.name.lower(): int(f) for f in _sys.PerfFlag if f.name is not None}  # iteration: named bits only


def make_attr(
    type: int,
    config: int = 0,
    *,
    sample_period: int = 0,
    flags: frozenset[str] | set[str] = frozenset(),
    wakeup_events: int = 0,
    config1: int = 0,
    config2: int = 0,
) -> _sys.PerfEventAttr:
    """A ``struct perf_event_attr`` for the syscall layer; ``flags`` names
    bits of the flag word (``{"disabled", "freq"}``).

    :raises ParseError: an unknown flag name or a field out of range.
    """
    word = 0
    for f in flags:
        if f not in _FLAG_BITS:
            raise ParseError(f"unknown perf_event_attr flag {f!r}; known: {sorted(_FLAG_BITS)}")
        word |= _FLAG_BITS[f]
    for label, v, bits in (("type", type, 32), ("config", config, 64), ("sample_period", sample_period, 64),
                           ("config1", config1, 64), ("config2", config2, 64), ("wakeup_events", wakeup_events, 32)):
        if not 0 <= v < (1 << bits):
            raise ParseError(f"perf_event_attr.{label} = {v} out of range")
    attr = _sys.PerfEventAttr(type=type, config=config, sample_period=sample_period, flags=word,
                              wakeup_events=wakeup_events, config1=config1, config2=config2)
    attr.size = ctypes.sizeof(_sys.PerfEventAttr)
    return attr


def perf_event_open(attr: _sys.PerfEventAttr, pid: int = -1, cpu: int = 0, group_fd: int = -1,
                    flags: int = PERF_FLAG_FD_CLOEXEC) -> _sys.Fd:
    """``perf_event_open(2)`` (see :func:`bpfmux.live.sys.perf_event_open`).

    :raises BpfError: the kernel refused (``errno`` kept).
    """
    return _sys.perf_event_open(attr, pid, cpu, group_fd, flags)


class PerfEvent:
    """An open perf event; closes its fd on :meth:`close` (idempotent).

    :ivar kind: ``"tracepoint"``, ``"uprobe"``, ``"uretprobe"``, ``"kprobe"``,
        ``"kretprobe"``, ``"software"``, ``"hardware"``.
    :ivar target: what it watches (``"sched:sched_switch"``, ``"/lib/…:0x1234"``, …).
    :ivar cpu: the CPU it counts on (``-1``: any).
    """

    __slots__ = ("_fd", "kind", "target", "cpu", "__weakref__")

    def __init__(self, fd: _sys.Fd, kind: str, target: str, cpu: int = -1) -> None:
        self._fd = fd
        self.kind = kind
        self.target = target
        self.cpu = cpu

    def __repr__(self) -> str:
        state = "closed" if self._fd.closed else f"fd={self._fd.fd}"
        return f"<PerfEvent {self.kind} {self.target} {state}>"

    @property
    def fd(self) -> int:
        """The descriptor number.

        :raises BpfError: ``EBADF`` once closed.
        """
        return self._fd.fd

    def fileno(self) -> int:
        """The descriptor number.

        :raises BpfError: ``EBADF`` once closed.
        """
        return self._fd.fd

    @property
    def closed(self) -> bool:
        """True once closed."""
        return self._fd.closed

    def close(self) -> None:
        """Close the event (this also detaches a program attached through
        :meth:`set_bpf`); a second call does nothing."""
        self._fd.close()

    def __enter__(self) -> PerfEvent:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def enable(self) -> None:
        """``PERF_EVENT_IOC_ENABLE``.

        :raises BpfError: the ioctl failed.
        """
        _sys.perf_event_enable(self._fd)

    def disable(self) -> None:
        """``PERF_EVENT_IOC_DISABLE``.

        :raises BpfError: the ioctl failed.
        """
        _sys.perf_event_disable(self._fd)

    def set_bpf(self, prog_fd: _sys.Fd | int) -> None:
        """Attach a program with ``PERF_EVENT_IOC_SET_BPF`` (the pre-link way;
        this perf event then owns the attachment).

        :raises BpfError: ``EEXIST`` this event already has a program;
            ``E2BIG`` the tracepoint already runs 64 programs; ``EINVAL``
            wrong program type for this event.
        """
        _sys.perf_event_set_bpf(self._fd, prog_fd)

    def query_bpf(self, capacity: int = 64) -> list[int]:
        """Ids of the programs that run on this event's tracepoint/probe, in run order.

        :raises BpfError: ``ENOSPC`` more than ``capacity`` programs;
            ``EINVAL`` the event is not a tracepoint/kprobe/uprobe.
        """
        return _sys.perf_event_query_bpf(self._fd, capacity)


# ---------------------------------------------------------------------------
# dynamic PMUs

_PMU_ROOT = "/sys/bus/event_source/devices"


@lru_cache(maxsize=16)
def pmu_type(name: str) -> int:
    """The ``type`` number of a dynamic PMU (``"uprobe"``, ``"kprobe"``, ``"cpu"``).

    :raises NotSupportedError: this kernel has no such PMU.
    """
    path = os.path.join(_PMU_ROOT, name, "type")
    try:
        return int(read_text(path, 4096, "PMU type", encoding="ascii").strip())
    except FileNotFoundError:
        raise NotSupportedError(f"{name} PMU", f"this kernel has no {name} PMU ({path} is missing)") from None
    except ValueError:
        raise ParseError("not a number", 0, path) from None


@lru_cache(maxsize=16)
def pmu_format_bit(pmu: str, field: str) -> int:
    """Bit number of a one-bit format field, e.g. ``pmu_format_bit("uprobe", "retprobe")``
    reads ``config:0`` and returns 0.

    :raises NotSupportedError: the PMU or field does not exist.
    :raises ParseError: the format is not ``config:N``.
    """
    path = os.path.join(_PMU_ROOT, pmu, "format", field)
    try:
        text = read_text(path, 4096, "PMU format", encoding="ascii").strip()
    except FileNotFoundError:
        raise NotSupportedError(f"{pmu} PMU {field}", f"{path} is missing") from None
    return parse_format_bit(text, path)


def parse_format_bit(text: str, source: str = "format") -> int:
    """``"config:0"`` → 0.

    :raises ParseError: anything else (a range, another config word).
    """
    name, sep, bits = text.partition(":")
    if sep != ":" or name != "config" or not bits.isdigit():
        raise ParseError(f"expected 'config:<bit>', got {text!r}", 0, source)
    bit = int(bits)
    if bit > 63:
        raise ParseError(f"bit {bit} out of range", 0, source)
    return bit


# ---------------------------------------------------------------------------
# openers


def open_tracepoint(tracepoint: str | int, pid: int = -1, cpu: int = 0) -> PerfEvent:
    """A perf event on a tracepoint (``"sched:sched_switch"`` or its numeric id).

    With ``pid=-1, cpu=0`` (the default) a BPF program attached to it runs on
    every hit on every CPU.

    :raises NotFoundError: no such tracepoint.
    :raises BpfError: perf_event_open failed.
    """
    if isinstance(tracepoint, int):
        tp_id, name = tracepoint, str(tracepoint)
    else:
        tp_id, name = tracefs.tracepoint_id(tracepoint), tracepoint
    attr = make_attr(PerfType.TRACEPOINT, tp_id, sample_period=1, wakeup_events=1)
    return PerfEvent(perf_event_open(attr, pid, cpu), "tracepoint", name, cpu)


def _probe_event(pmu: str, retprobe: bool, name: bytes | None, offset_or_addr: int, pid: int,
                 config_extra: int, kind: str, target: str) -> PerfEvent:  # fmt: skip
    ptype = pmu_type(pmu)
    config = config_extra
    if retprobe:
        config |= 1 << pmu_format_bit(pmu, "retprobe")
    keep = ctypes.create_string_buffer(name) if name is not None else None
    attr = make_attr(
        ptype,
        config,
        sample_period=1,
        wakeup_events=1,
        config1=ctypes.addressof(keep) if keep is not None else 0,
        config2=offset_or_addr,
    )
    cpu = 0 if pid < 0 else -1
    fd = perf_event_open(attr, pid, cpu)
    del keep
    return PerfEvent(fd, kind, target, cpu)


def open_uprobe(path: str, offset: int, retprobe: bool = False, pid: int = -1, ref_ctr_offset: int = 0) -> PerfEvent:
    """A uprobe (or uretprobe) at ``offset`` bytes into the file ``path``.

    :param pid: only this process (``-1``: every process that maps the file).
    :param ref_ctr_offset: file offset of a USDT semaphore to increment.
    :raises NotSupportedError: no uprobe PMU.
    :raises NotFoundError: ``path`` does not exist.
    :raises BpfError: the kernel refused the probe (``EINVAL``: offset not on
        an instruction or outside the file).
    """
    if not os.path.exists(path):
        raise NotFoundError("binary", path, "the file does not exist")
    if offset < 0:
        raise ParseError(f"negative uprobe offset {offset}")
    extra = 0
    if ref_ctr_offset:
        extra = (ref_ctr_offset & 0xFFFFFFFF) << 32
    kind = "uretprobe" if retprobe else "uprobe"
    return _probe_event("uprobe", retprobe, os.fsencode(path), offset, pid, extra, kind, f"{path}:{offset:#x}")


def open_kprobe(function: str | None = None, offset: int = 0, address: int = 0, retprobe: bool = False) -> PerfEvent:
    """A kprobe (or kretprobe) on ``function+offset``, or on a raw ``address``.

    :raises NotSupportedError: this kernel has no kprobe PMU.
    :raises BpfError: the kernel refused the probe (``ENOENT``: no such function).
    """
    if function is None and not address:
        raise ParseError("a kprobe needs a function name or an address")
    kind = "kretprobe" if retprobe else "kprobe"
    target = function + (f"+{offset:#x}" if offset else "") if function else f"{address:#x}"
    name = function.encode() if function else None
    try:
        return _probe_event("kprobe", retprobe, name, offset if function else address, -1, 0, kind, target)
    except BpfError as err:
        if err.errno != _errno.ENOENT or not function:
            raise
        raise BpfError(_errno.ENOENT, f"{kind} on {target}: this kernel has no function {function!r} (a module "
                       "not loaded, a function renamed or inlined since; /proc/kallsyms lists what there is)") from err


def open_software(
    config: PerfSwId | int,
    cpu: int,
    pid: int = -1,
    sample_period: int | None = None,
    sample_freq: int | None = None,
) -> PerfEvent:
    """A software sampling event (``PerfSwId.CPU_CLOCK``, …) on one CPU.

    Give exactly one of ``sample_period`` (events per sample) or
    ``sample_freq`` (samples per second).

    :raises BpfError: perf_event_open failed.
    """
    return _sampling(PerfType.SOFTWARE, int(config), cpu, pid, sample_period, sample_freq, "software",
                     _enum_name(PerfSwId, config))  # fmt: skip


def open_hardware(
    config: PerfHwId | int,
    cpu: int,
    pid: int = -1,
    sample_period: int | None = None,
    sample_freq: int | None = None,
) -> PerfEvent:
    """A hardware sampling event (``PerfHwId.CPU_CYCLES``, …) on one CPU.

    :raises NotSupportedError: this machine has no hardware PMU (a VM
        without PMU passthrough: ``ENOENT``/``EOPNOTSUPP``).
    :raises BpfError: perf_event_open failed otherwise.
    """
    try:
        return _sampling(PerfType.HARDWARE, int(config), cpu, pid, sample_period, sample_freq, "hardware",
                         _enum_name(PerfHwId, config))  # fmt: skip
    except BpfError as e:
        if e.errno in (_errno.ENOENT, _errno.EOPNOTSUPP, _errno.ENODEV):
            raise NotSupportedError(
                "hardware perf events", f"no hardware PMU for {_enum_name(PerfHwId, config)} on this machine ({e})"
            ) from e
        raise


def _enum_name(enum_cls: type[enum.Enum], value: int) -> str:
    try:
        return enum_cls(value).name.lower()
    except ValueError:
        return str(int(value))


def _sampling(ptype: int, config: int, cpu: int, pid: int, period: int | None, freq: int | None, kind: str,
              name: str) -> PerfEvent:  # fmt: skip
    if (period is None) == (freq is None):
        raise ParseError("give exactly one of sample_period or sample_freq")
    flags = frozenset({"freq"}) if freq is not None else frozenset()
    value = freq if freq is not None else period
    if not value or value < 0:
        raise ParseError("sample_period/sample_freq must be positive")
    attr = make_attr(ptype, config, sample_period=value, flags=flags)
    return PerfEvent(perf_event_open(attr, pid, cpu), kind, name, cpu)

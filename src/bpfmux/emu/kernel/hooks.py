"""Hooks with program arrays: tracepoints, kprobe events, perf events (``multi-attach.md`` §1).

Every tracepoint and kprobe event (the kernel's ``trace_event_call``) runs an
*array* of programs, at most :data:`~bpfmux.uapi.BPF_TRACE_MAX_PROGS`, in
attach order. A program gets into the array through a perf event
(``PERF_EVENT_IOC_SET_BPF``) or a ``BPF_PERF_EVENT`` link, and that perf event
or link *owns* it: closing an owner removes exactly its own program, and a
program lives while any fd, perf event or link holds it (the seed's bug was a
close that freed another owner's program).

Raw tracepoint and ``tp_btf`` links are the tracepoint's other probes; they
run in registration order with the perf probe (registered when the event's
array becomes non-empty).
"""

from __future__ import annotations

import errno
import struct
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ...abi.ptregs import ARG_REGS, PERF_EVENT_DATA_SIZE, pack_pt_regs
from ...abi.tpformat import TracepointFormat
from ...errors import BpfError, BpfmuxError
from ...uapi import BPF_TRACE_MAX_PROGS, ProgType

if TYPE_CHECKING:
    from .links import RawTracepointLink
    from .objects import EmulatedProgram as EmuProgram
    from .registry import Registry

U64 = (1 << 64) - 1


class ProgArray:
    """The program array of one ``trace_event_call``."""

    def __init__(self, name: str) -> None:
        self.name = name
        #: (program, owner, cookie) in run order
        self.items: list[tuple[EmuProgram, object, int]] = []

    def add(self, prog: EmuProgram, owner: object, cookie: int = 0) -> None:
        """Append ``prog`` owned by ``owner``.

        :raises BpfError: ``E2BIG`` the array is full; ``EEXIST`` the program
            is already in it (the kernel refuses duplicates).
        """
        if len(self.items) >= BPF_TRACE_MAX_PROGS:
            raise BpfError(errno.E2BIG, f"{self.name} already runs {BPF_TRACE_MAX_PROGS} programs")
        if any(p is prog for p, _, _ in self.items):
            raise BpfError(errno.EEXIST, f"program {prog.name!r} is already attached to {self.name}")
        self.items.append((prog, owner, cookie))

    def remove(self, owner: object) -> EmuProgram | None:
        """Remove the program ``owner`` put there; returns it."""
        for i, (p, o, _) in enumerate(self.items):
            if o is owner:
                del self.items[i]
                return p
        return None

    def ids(self) -> list[int]:
        """Program ids in run order."""
        return [p.id for p, _, _ in self.items]

    def __len__(self) -> int:
        return len(self.items)


class TraceEvent:
    """A tracepoint or kprobe event: its program array and its raw probes.

    :ivar name: ``system:event`` (tracepoints) or ``kprobe:func`` /
        ``kretprobe:func``.
    :ivar prog_type: the program type its array accepts.
    :ivar format: the record format (tracepoints).
    :ivar func: the probed function (kprobe events).
    """

    def __init__(self, name: str, prog_type: ProgType, fmt: TracepointFormat | None = None, func: Any = None,
                 retprobe: bool = False) -> None:
        self.name = name
        self.prog_type = prog_type
        self.format = fmt
        self.func = func
        self.retprobe = retprobe
        self.array = ProgArray(name)
        #: probes in registration order: ("perf", None) or ("raw", link)
        self.probes: list[tuple[str, RawTracepointLink | None]] = []
        self.hits = 0

    def _sync_perf_probe(self) -> None:
        registered = any(kind == "perf" for kind, _ in self.probes)
        if self.array.items and not registered:
            self.probes.append(("perf", None))
        elif not self.array.items and registered:
            self.probes = [p for p in self.probes if p[0] != "perf"]

    def attach(self, prog: EmuProgram, owner: object, cookie: int = 0) -> None:
        """Add ``prog`` to the array for ``owner``.

        :raises BpfError: ``EINVAL`` wrong program type; ``E2BIG``; ``EEXIST``.
        """
        if prog.prog_type != self.prog_type:
            raise BpfError(errno.EINVAL, f"{self.name} runs {self.prog_type.name.lower()} programs, "
                                         f"not {ProgType(prog.prog_type).name.lower()} ({prog.name!r})")
        if self.format is not None and prog.max_ctx_offset > self.format.size:
            raise BpfError(errno.EACCES, f"{prog.name} reads up to byte {prog.max_ctx_offset} of its context, "
                                         f"past the end of {self.name}'s {self.format.size}-byte record")
        self.array.add(prog, owner, cookie)
        self._sync_perf_probe()

    def detach(self, owner: object) -> EmuProgram | None:
        """Remove the program ``owner`` attached."""
        prog = self.array.remove(owner)
        self._sync_perf_probe()
        return prog

    def add_raw(self, link: RawTracepointLink) -> None:
        """Register a raw tracepoint / tp_btf link."""
        self.probes.append(("raw", link))

    def remove_raw(self, link: RawTracepointLink) -> None:
        """Unregister a raw tracepoint / tp_btf link."""
        self.probes = [p for p in self.probes if p[1] is not link]


class EmuPerfEvent:
    """An emulated perf event: a tracepoint, kprobe or sampling event.

    Created by :meth:`bpfmux.emu.Emulator.perf_event_open`; it registers
    itself with the kernel's :class:`~bpfmux.emu.kernel.registry.Registry`. It holds at most
    one program (``set_bpf``; a second fails ``EEXIST``). The event stays
    alive while its fd or a ``BPF_PERF_EVENT`` link holds it; when the last
    holder goes, its program leaves the hook and is released.
    """

    def __init__(self, registry: Registry, event: TraceEvent | None, *,
                 sampling: Mapping[str, Any] | None = None) -> None:
        self.registry = registry
        registry.perf_events.add(self)
        self.event = event
        self.sampling = dict(sampling or {})
        self.prog: EmuProgram | None = None
        self.owner: object = None
        self._holders = 1  # the fd
        self._fd_open = True

    @property
    def closed(self) -> bool:
        """True once the fd is closed (a link may still hold the event)."""
        return not self._fd_open

    def _attach(self, prog: EmuProgram, owner: object, cookie: int = 0) -> None:
        if not self._holders:
            raise BpfError(errno.EBADF, "perf event is closed")
        if self.prog is not None:
            raise BpfError(errno.EEXIST, "this perf event already has a program; open another perf event")
        if self.event is not None:
            self.event.attach(prog, owner, cookie)
        elif prog.prog_type != ProgType.PERF_EVENT:
            raise BpfError(errno.EINVAL, f"sampling events run perf_event programs, not {prog.name!r}")
        prog.hold()
        self.prog, self.owner, self.cookie = prog, owner, cookie

    def _detach(self) -> None:
        if self.prog is None:
            return
        if self.event is not None:
            self.event.detach(self.owner)
        prog, self.prog, self.owner = self.prog, None, None
        prog.release()

    def set_bpf(self, prog: EmuProgram) -> None:
        """``PERF_EVENT_IOC_SET_BPF``: attach ``prog``, owned by this perf event.

        :raises BpfError: ``EEXIST`` it already has one; ``EINVAL`` wrong
            program type; ``E2BIG`` the hook's array is full.
        """
        self._attach(prog, self)

    def query(self, max_ids: int | None = None) -> list[int]:
        """``PERF_EVENT_IOC_QUERY_BPF``: ids of the hook's programs in run order.

        :raises BpfError: ``ENOSPC`` more programs than ``max_ids``.
        """
        ids = self.event.array.ids() if self.event is not None else ([self.prog.id] if self.prog else [])
        if max_ids is not None and len(ids) > max_ids:
            err = BpfError(errno.ENOSPC, f"{len(ids)} programs; a buffer for {max_ids} is too small")
            err.count = len(ids)  # type: ignore[attr-defined]  # an extra the live kernel's error does not carry
            raise err
        return ids

    def hold(self) -> None:
        """A link takes a reference."""
        self._holders += 1

    def put(self) -> None:
        """Drop one reference; the last one detaches the program."""
        self._holders -= 1
        if not self._holders:
            self._detach()
            self.registry.perf_events.discard(self)

    def close(self) -> None:
        """Close the perf event's fd (idempotent)."""
        if self._fd_open:
            self._fd_open = False
            self.put()

    def __enter__(self) -> EmuPerfEvent:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        what = self.event.name if self.event else f"sampling {self.sampling}"
        return f"<EmuPerfEvent {what} prog={self.prog.name if self.prog else None}>"


# -- contexts -----------------------------------------------------------------


def tracepoint_record(fmt: TracepointFormat, fields: Mapping[str, Any], *, pid: int = 0) -> bytearray:
    """Lay out a tracepoint record from field values (missing fields are 0).

    Integers are stored with the field's size; ``bytes``/``str`` fill char
    arrays; ``__data_loc`` fields take ``bytes``/``str`` appended after the
    fixed part.

    :raises BpfmuxError: a field the event does not have.
    """
    rec = bytearray(fmt.size)
    known = {f.name: f for f in fmt.fields}
    values: dict[str, Any] = {"common_type": fmt.id, "common_pid": pid}
    values.update(fields)
    tail = bytearray()
    for name, value in values.items():
        f = known.get(name)
        if f is None:
            raise BpfmuxError(f"tracepoint {fmt.system}:{fmt.name} has no field {name!r}; "
                              f"it has {', '.join(x.name for x in fmt.fields if not x.common)}")
        if f.data_loc:
            data = value.encode() + b"\0" if isinstance(value, str) else bytes(value)
            off = fmt.size + len(tail)
            tail += data
            struct.pack_into("<I", rec, f.offset, (len(data) << 16) | off)
        elif isinstance(value, str | bytes | bytearray):
            data = value.encode() if isinstance(value, str) else bytes(value)
            rec[f.offset : f.offset + f.size] = data[: f.size].ljust(f.size, b"\0")
        elif f.array_len:
            per = f.size // f.array_len
            for i, v in enumerate(list(value)[: f.array_len]):
                rec[f.offset + i * per : f.offset + (i + 1) * per] = (int(v) & ((1 << (8 * per)) - 1)).to_bytes(per, "little")
        else:
            rec[f.offset : f.offset + f.size] = (int(value) & ((1 << (8 * f.size)) - 1)).to_bytes(f.size, "little")
    return rec + tail


def kprobe_regs(addr: int, args: Sequence[int], *, full: bool = True, ret: int | None = None,
                ret_addr: int = 0, sp: int = 0) -> bytearray:
    """A ``pt_regs`` for a kprobe hit.

    ``full``: a single kprobe sees every register (the ones a call does not
    define read 0 here). ``full=False`` is kprobe_multi (fprobe): only di, si,
    dx, cx, sp and ip are populated (the seed's "optimized fprobe"). ``ret``
    makes it a return probe (``ax`` holds the return value and ``ip`` the
    return address).
    """
    names = ARG_REGS if full else ARG_REGS[:4]
    regs = {n: a for n, a in zip(names, args, strict=False)}
    regs["sp"] = sp
    if ret is None:
        regs["ip"] = addr
    else:
        regs["ax"] = ret & U64
        regs["ip"] = ret_addr
    return bytearray(pack_pt_regs(regs))


def perf_event_data(regs: Mapping[str, int] | None, sample_period: int, addr: int) -> bytearray:
    """A ``struct bpf_perf_event_data``."""
    data = bytearray(PERF_EVENT_DATA_SIZE)
    data[:168] = pack_pt_regs(dict(regs or {}))
    struct.pack_into("<QQ", data, 168, sample_period & U64, addr & U64)
    return data


RunFn = Callable[..., int]

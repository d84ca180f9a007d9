"""The tracer: maps, generated programs and links for a set of probe specs,
and snapshots of what they counted, on either kernel.

``with Tracer(specs, options, kernel=k) as t:`` plans
(:mod:`bpfmux.trace.plan`, asking the kernel what exists), creates the maps,
loads one generated program per group (:mod:`bpfmux.trace.progs`) and
attaches it with the group's :class:`~bpfmux.trace.plan.Mechanism`, all
through the kernel contract (:mod:`bpfmux.api`), so the same tracer runs on
the live kernel and on the emulated one. :meth:`Tracer.snapshot` reads the
maps; :meth:`Tracer.close` detaches and closes everything (also on errors
and Ctrl-C during setup).
"""

from __future__ import annotations

import contextlib
import errno
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from .. import api
from ..errors import ENOTSUPP, BpfError, NotFoundError, NotSupportedError
from ..uapi import AttachType, MapType, ProgType
from . import progs as P
from .plan import Group, Mechanism, Probe, TraceOptions, plan
from .spec import ProbeSpec

if TYPE_CHECKING:
    from ..btf.funcs import FuncSignature

__all__ = ["EventReader", "Snapshot", "Tracer"]


class EventReader(Protocol):
    """A ring buffer reader of either kernel (:class:`~bpfmux.live.ringbuf.RingBuffer`, the emulator's
    ``RingReader``): what :meth:`Tracer.events` returns."""

    def poll(self, timeout: float | None = None) -> int: ...

    def consume(self) -> int: ...

    def close(self) -> None: ...


@runtime_checkable
class _EventMap(Protocol):
    """A ring buffer map of either kernel: it makes readers."""

    def reader(self, callback: Callable[[bytes], Any]) -> EventReader: ...


@dataclass
class Snapshot:
    """What the maps held at one moment.

    :ivar time: ``time.monotonic()`` of the read.
    :ivar counts: (probe index, pid, comm) → hits (pid 0 / comm "" when not
        split by them).
    :ivar hists: (probe index, pid, comm) → {bucket: count} (latency).
    :ivar latsum: probe index → total ns (latency).
    :ivar stacks: (probe index, kernel stack id, user stack id, pid, comm) → count.
    :ivar drops: events lost because the ring buffer was full.
    """

    time: float
    counts: dict[tuple[int, int, str], int] = field(default_factory=dict)
    hists: dict[tuple[int, int, str], dict[int, int]] = field(default_factory=dict)
    latsum: dict[int, int] = field(default_factory=dict)
    stacks: dict[tuple[int, int, int, int, str], int] = field(default_factory=dict)
    drops: int = 0


def _comm(raw: bytes) -> str:
    return raw.split(b"\0", 1)[0].decode(errors="replace")


class Tracer:
    """Generated programs on every probe of ``specs``, on either kernel.

    :param kernel: the :class:`~bpfmux.api.Kernel` to trace (default: a new
        :class:`~bpfmux.live.LiveKernel`, closed with the tracer).
    :ivar groups: the planned :class:`~bpfmux.trace.plan.Group` list.
    :ivar probes: every probe, by index.
    :ivar mechanisms: one line per group saying how it was attached.
    :ivar attach_seconds: time from :meth:`start` to everything attached.
    """

    def __init__(self, specs: list[ProbeSpec], options: TraceOptions | None = None, *,
                 kernel: api.Kernel | None = None) -> None:
        self.specs = specs
        self.options = options or TraceOptions()
        self.kernel = kernel
        self._own_kernel = kernel is None
        self.groups: list[Group] = []
        self.probes: list[Probe] = []
        self.mechanisms: list[str] = []
        self.attach_seconds = 0.0
        self.maps: dict[str, api.Map] = {}
        self._programs: list[api.Program] = []
        self._links: list[api.Link] = []
        self._ring: EventReader | None = None
        self._started = False
        self._closed = False

    # --- lifecycle --------------------------------------------------------------------

    def __enter__(self) -> Tracer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        """Plan, create maps, load and attach. All or nothing.

        :raises NotFoundError: a spec matches nothing.
        :raises NotSupportedError: the kernel lacks a needed feature.
        :raises BpfError: the kernel refused something.
        """
        if self._started:
            return
        self._started = True
        t0 = time.monotonic()
        try:
            if self.kernel is None:
                from ..live import LiveKernel

                self.kernel = LiveKernel()
            self.groups, self.probes = plan(self.specs, self.options, self.kernel)
            self._create_maps()
            for g in self.groups:
                self._attach_group(g)
        except BaseException:
            self.close()
            raise
        self.attach_seconds = time.monotonic() - t0

    def close(self) -> None:
        """Detach every link, close programs, maps and the ring buffer reader
        (all of them even if one close fails); idempotent.

        :raises BaseException: the first error a close raised, after everything was closed.
        """
        if self._closed:
            return
        self._closed = True
        links, self._links = self._links, []
        closables: list[api.Link | EventReader | api.Program | api.Map | api.Kernel] = [*links, *([self._ring] if self._ring is not None else []), *self._programs,
                                *self.maps.values()]
        if self._own_kernel and self.kernel is not None:
            closables.append(self.kernel)
        self._programs = []
        self.maps = {}
        api.close_all(closables)

    @property
    def _k(self) -> api.Kernel:
        assert self.kernel is not None, "start() sets the kernel"
        return self.kernel

    # --- maps -------------------------------------------------------------------------

    def _create_maps(self) -> None:
        opts = self.options
        n = max(1, len(self.probes))
        by = opts.by is not None

        def mk(name: str, t: MapType, k: int, v: int, entries: int) -> None:
            self.maps[name] = self._k.create_map(t, k, v, entries, name=f"bpfmux_{name}"[:15])

        mode = opts.mode
        if mode == "count" and not by:
            mk("counts", MapType.PERCPU_ARRAY, 4, 8, n)
        if by or mode == "stacks":
            mk("agg", MapType.HASH, P.AGG_KEY.size, 8, 65536)
        if mode == "latency":
            mk("latsum", MapType.PERCPU_ARRAY, 4, 8, n)
            if not by:
                mk("hist", MapType.PERCPU_ARRAY, 4, 8, n * P.HIST_BUCKETS)
            if any(g.role in ("entry", "exit") for g in self.groups):
                mk("start", MapType.HASH, 16, 8, 65536)
        if mode == "stacks":
            mk("stacks", MapType.STACK_TRACE, 4, 127 * 8, 16384)
        if mode == "args":
            mk("events", MapType.RINGBUF, 0, 0, 1 << 24)
            mk("drops", MapType.PERCPU_ARRAY, 4, 8, 1)
        for table, how in (("sysidx", Mechanism.SYS_ENTER), ("sysidx_exit", Mechanism.SYS_EXIT)):
            groups = [g for g in self.groups if g.how == how]
            if not groups:
                continue
            mk(table, MapType.ARRAY, 4, 4, P.SYSIDX_ENTRIES)
            values: dict[int, int] = {}
            for g in groups:
                for p in g.probes:
                    values[p.info["syscall"]] = p.idx + 1
            if mode == "args" and how == Mechanism.SYS_ENTER:
                self._syscall_string_args(values)
            m = self.maps[table]
            for nr, v in values.items():
                if 0 <= nr < P.SYSIDX_ENTRIES:
                    m[nr] = v.to_bytes(4, "little")

    def _syscall_string_args(self, values: dict[int, int]) -> None:
        """For --args on sys_enter: mark the first ``char *`` argument of each syscall."""
        from .decode import syscall_fields

        for g in self.groups:
            if g.how != Mechanism.SYS_ENTER:
                continue
            for p, name in zip(g.probes, g.targets, strict=True):
                fields = syscall_fields(name)
                p.info["fields"] = fields
                for i, f in enumerate(fields[:6]):
                    if "char" in f.type and "*" in f.type:
                        values[p.info["syscall"]] |= (i + 1) << 24
                        break

    # --- programs ---------------------------------------------------------------------

    def _action(self, g: Group) -> P.Action:
        mode = self.options.mode
        if mode == "count":
            return P.Action.COUNT
        if mode == "stacks":
            return P.Action.STACKS
        if mode == "args":
            return P.Action.ARGS
        return {"session": P.Action.LAT_SESSION, "entry": P.Action.LAT_ENTRY, "exit": P.Action.LAT_EXIT}[g.role]

    def _spec(self, g: Group, idx: P.IdxSource, imm: int = 0, payload: P.Payload = P.Payload.REGS,
              nargs: int = 0) -> P.Spec:  # fmt: skip
        o = self.options
        return P.Spec(self._action(g), idx, imm=imm, filters=P.Filters(o.pid, o.comm, o.skip_comm), by_pid=o.by == "pid",
                      by_comm=o.by == "comm", min_latency=o.min_latency, payload=payload, nargs=nargs)

    def _load(self, spec: P.Spec, prog_type: ProgType, name: str, *, attach: AttachType | None = None,
              target: str | None = None) -> api.Program:  # fmt: skip
        prog = P.build(spec)
        values: dict[Any, int] = {name: m.fd for name, m in self.maps.items()}
        for r in prog.relocations:
            if r.kind.value == "kfunc" and r.ref not in values:
                values[r.ref] = self._k.btf_id(str(r.ref), "func")
        insns = prog.resolve(values)
        p = self._k.load_program(insns, prog_type, name=name[:15], attach_type=attach, attach_target=target)
        self._programs.append(p)
        return p

    # --- one method per mechanism -----------------------------------------------------

    def _attach_group(self, g: Group) -> None:
        _ATTACH[g.how](self, g)

    def _uprobe_multi(self, g: Group) -> None:
        session = g.role == "session"
        at = AttachType.TRACE_UPROBE_SESSION if session else AttachType.TRACE_UPROBE_MULTI
        prog = self._load(self._spec(g, P.IdxSource.COOKIE), ProgType.KPROBE, "bpfmux_uprobe", attach=at)
        pid = self.options.pid if self.options.pid is not None else -1
        link = prog.attach_many(g.targets, [p.idx for p in g.probes], retprobe=g.retprobe, session=session, pid=pid)
        self._links.append(link)
        nlinks = len(getattr(link, "links", [link]))
        kind = "uprobe session" if session else ("uretprobe_multi" if g.retprobe else "uprobe_multi")
        self.mechanisms.append(f"{g.spec.text}: {kind}, {len(g.probes)} functions in {nlinks} link(s)"
                               f"{', pid filter in the link' if pid > 0 else ''}")  # fmt: skip

    def _uprobe(self, g: Group) -> None:
        prog = self._load(self._spec(g, P.IdxSource.COOKIE), ProgType.KPROBE, "bpfmux_uprobe")
        pid = self.options.pid if self.options.pid is not None else -1
        self._links.append(prog.attach_many(g.targets, [p.idx for p in g.probes], retprobe=g.retprobe, pid=pid))
        self.mechanisms.append(f"{g.spec.text}: {len(g.probes)} perf-event {'uretprobes' if g.retprobe else 'uprobes'} "
                               "(no uprobe_multi on this kernel)")  # fmt: skip

    def _kprobe_multi(self, g: Group) -> None:
        session = g.role == "session"
        at = AttachType.TRACE_KPROBE_SESSION if session else AttachType.TRACE_KPROBE_MULTI
        prog = self._load(self._spec(g, P.IdxSource.COOKIE), ProgType.KPROBE, "bpfmux_kprobe", attach=at)
        self._links.append(prog.attach_many(g.targets, [p.idx for p in g.probes], retprobe=g.retprobe,
                                            session=session))  # fmt: skip
        kind = "kprobe session" if session else ("kretprobe_multi" if g.retprobe else "kprobe_multi")
        self.mechanisms.append(f"{g.spec.text}: {kind}, {len(g.probes)} functions in 1 link")

    def _kprobe(self, g: Group) -> None:
        prog = self._load(self._spec(g, P.IdxSource.COOKIE), ProgType.KPROBE, "bpfmux_kprobe")
        self._links.append(prog.attach_many(g.targets, [p.idx for p in g.probes], retprobe=g.retprobe))
        self.mechanisms.append(f"{g.spec.text}: {len(g.probes)} perf-event {'kretprobes' if g.retprobe else 'kprobes'}")

    def _syscalls(self, g: Group) -> None:
        enter = g.how == Mechanism.SYS_ENTER
        src = P.IdxSource.SYSCALL_ENTER if enter else P.IdxSource.SYSCALL_EXIT
        payload = P.Payload.SYSCALL_REGS if enter else P.Payload.SYSCALL_RET
        prog = self._load(self._spec(g, src, payload=payload), ProgType.RAW_TRACEPOINT, f"bpfmux_{g.how}")
        self._links.append(prog.attach(str(g.how)))
        self.mechanisms.append(f"{' '.join(g.extra.get('specs', [g.spec.text]))}: 1 raw tracepoint ({g.how}) with an in-kernel filter on "
                               f"{len(g.probes)} syscall numbers")  # fmt: skip

    def _raw_tp(self, g: Group) -> None:
        prog = self._load(self._spec(g, P.IdxSource.COOKIE, payload=P.Payload.RAW_ARGS), ProgType.RAW_TRACEPOINT,
                          "bpfmux_raw_tp")  # fmt: skip
        fallback_t, fallback_p = [], []
        count = 0
        for t, p in zip(g.targets, g.probes, strict=True):
            bare = t.rsplit(":", 1)[-1]
            try:
                self._links.append(prog.attach(bare, cookie=p.idx))
                count += 1
            except NotFoundError:
                if g.spec.kind == "rawtracepoint":
                    raise
                fallback_t.append(t)
                fallback_p.append(p)
        if count:
            self.mechanisms.append(f"{g.spec.text}: {count} raw tracepoint links (one program, probe in the cookie)")
        if fallback_t:
            self._tracepoints(g, fallback_t, fallback_p, why=" (no raw tracepoint of that name)")

    def _tracepoint_group(self, g: Group) -> None:
        self._tracepoints(g, g.targets, g.probes, why="")

    def _tracepoints(self, g: Group, targets: list[str], probes: list[Probe], why: str) -> None:
        prog = self._load(self._spec(g, P.IdxSource.COOKIE, payload=P.Payload.RECORD), ProgType.TRACEPOINT,
                          "bpfmux_tp")  # fmt: skip
        self._links.append(prog.attach_many(targets, [p.idx for p in probes]))
        reason = why or (" (--args reads the record)" if self.options.mode == "args" else "")
        self.mechanisms.append(f"{g.spec.text}: {len(targets)} perf-event tracepoint links{reason}")

    def _tracing(self, g: Group) -> None:
        at = AttachType.TRACE_FENTRY if g.how == Mechanism.FENTRY else AttachType.TRACE_FEXIT
        for t, p in zip(g.targets, g.probes, strict=True):
            sig = self._signature(t)
            p.info["signature"] = sig
            nargs = sig.nregs + (1 if g.how == Mechanism.FEXIT else 0)
            try:
                prog = self._load(self._spec(g, P.IdxSource.IMM, imm=p.idx, payload=P.Payload.TRACING, nargs=nargs),
                                  ProgType.TRACING, f"bpfmux_{g.how}", attach=at, target=t)  # fmt: skip
            except BpfError as e:
                if e.errno in (errno.EPERM, errno.EOPNOTSUPP, ENOTSUPP):
                    raise NotSupportedError(g.how, f"{g.how}: probes are not supported by this kernel ({e}); use "
                                            "tracepoint: or rawtracepoint: probes instead") from e  # fmt: skip
                raise
            self._links.append(prog.attach())
        self.mechanisms.append(f"{g.spec.text}: {len(g.probes)} {g.how} trampoline links")

    def _signature(self, function: str) -> FuncSignature:
        """The function's prototype from the kernel's BTF."""
        btf = self._k.btf
        if btf is None:
            raise NotSupportedError("BTF", "fentry/fexit probes need the kernel's BTF")
        return btf.func(function)

    def _sampling(self, g: Group) -> None:
        from .spec import SOFTWARE_EVENTS

        s = g.spec
        p = g.probes[0]
        prog = self._load(self._spec(g, P.IdxSource.IMM, imm=p.idx), ProgType.PERF_EVENT, "bpfmux_sample")
        pid = self.options.pid if self.options.pid is not None else -1
        if s.kind == "profile":
            if s.name == "hz":
                link = prog.attach("cpu_clock", sample_freq=s.rate, pid=pid)
            else:
                unit = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000}[s.name]
                link = prog.attach("cpu_clock", sample_period=s.rate * unit, pid=pid)
        else:
            link = prog.attach(SOFTWARE_EVENTS[s.name][0], sample_period=s.rate, pid=pid)
        self._links.append(link)
        self.mechanisms.append(f"{s.text}: perf_event sampling on {len(getattr(link, 'links', [1]))} CPU(s)")

    def kind_of(self) -> dict[int, tuple[Mechanism, bool]]:
        """Probe index → (its group's mechanism, return probe), what
        :func:`bpfmux.trace.decode.decode_event` needs."""
        return {p.idx: (g.how, g.retprobe) for g in self.groups for p in g.probes}

    # --- reading ----------------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        """Read every aggregation map now.

        :raises BpfError: a map read failed.
        """
        snap = Snapshot(time.monotonic())
        m = self.maps
        if "counts" in m:
            for i, v in m["counts"].raw_items():
                total = _sum_percpu(v)
                if total:
                    snap.counts[(int.from_bytes(i, "little"), 0, "")] = total
        if "hist" in m:
            for i, v in m["hist"].raw_items():
                total = _sum_percpu(v)
                if total:
                    slot = int.from_bytes(i, "little")
                    snap.hists.setdefault((slot // P.HIST_BUCKETS, 0, ""), {})[slot % P.HIST_BUCKETS] = total
        if "latsum" in m:
            for i, v in m["latsum"].raw_items():
                total = _sum_percpu(v)
                if total:
                    snap.latsum[int.from_bytes(i, "little")] = total
        if "agg" in m:
            mode = self.options.mode
            for k, v in m["agg"].raw_items():
                idx, a, pid, b, comm = P.AGG_KEY.unpack(bytes(k))
                n = int.from_bytes(bytes(v)[:8], "little")
                if mode == "stacks":
                    snap.stacks[(idx, a, b, pid, _comm(comm))] = n
                elif mode == "latency":
                    snap.hists.setdefault((idx, pid, _comm(comm)), {})[a] = n
                else:
                    key = (idx, pid, _comm(comm))
                    snap.counts[key] = snap.counts.get(key, 0) + n
        if "drops" in m:
            for _, v in m["drops"].raw_items():
                snap.drops += _sum_percpu(v)
        return snap

    def stack(self, stack_id: int) -> list[int]:
        """Instruction pointers of a stack id (empty when the id is an error/absent)."""
        if stack_id < 0 or "stacks" not in self.maps:
            return []
        with contextlib.suppress(KeyError, BpfError):
            raw = self.maps["stacks"].lookup_raw(stack_id)
            if raw is None:
                return []
            ips = [int.from_bytes(raw[i:i + 8], "little") for i in range(0, len(raw), 8)]
            return [ip for ip in ips if ip]
        return []

    def events(self, callback: Callable[[bytes], Any]) -> EventReader:
        """The ring buffer reader of ``--args`` (``poll(timeout)`` delivers
        each raw event to ``callback``).

        :raises NotSupportedError: not in args mode.
        """
        if "events" not in self.maps:
            raise NotSupportedError("events", "only --args mode produces events")
        if self._ring is None:
            events = self.maps["events"]
            if not isinstance(events, _EventMap):
                raise NotSupportedError("events", f"this kernel's ring buffer map ({type(events).__name__}) has no "
                                        "reader()")
            self._ring = events.reader(callback)
        return self._ring


_ATTACH: dict[Mechanism, Callable[[Tracer, Group], None]] = {
    Mechanism.SYS_ENTER: Tracer._syscalls,
    Mechanism.SYS_EXIT: Tracer._syscalls,
    Mechanism.RAW_TP: Tracer._raw_tp,
    Mechanism.TRACEPOINT: Tracer._tracepoint_group,
    Mechanism.UPROBE_MULTI: Tracer._uprobe_multi,
    Mechanism.UPROBE: Tracer._uprobe,
    Mechanism.KPROBE_MULTI: Tracer._kprobe_multi,
    Mechanism.KPROBE: Tracer._kprobe,
    Mechanism.FENTRY: Tracer._tracing,
    Mechanism.FEXIT: Tracer._tracing,
    Mechanism.SAMPLING: Tracer._sampling,
}


def _sum_percpu(raw: Any) -> int:
    b = bytes(raw)
    if len(b) <= 8:
        return int.from_bytes(b, "little")
    total = 0
    for i in range(0, len(b) - 7, 8):
        total += int.from_bytes(b[i:i + 8], "little")
    return total

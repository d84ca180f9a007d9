"""Turning probe specs into attachments: which probes a spec names (globs
expanded) and which mechanism covers each group of them.

Each :class:`Group` becomes one multi-attach with the best mechanism the
kernel has (see :func:`plan`):

| probes | mechanism |
| --- | --- |
| ``tracepoint:syscalls:sys_enter_*`` (any subset) | one ``sys_enter`` raw tracepoint; the syscall number is filtered in the kernel through the ``sysidx`` array |
| ``tracepoint:syscalls:sys_exit_*`` | one ``sys_exit`` raw tracepoint, same filter |
| other tracepoints (count, stacks) | one program, one raw tracepoint link per tracepoint, the probe index in the BPF cookie |
| tracepoints with ``--args`` | tracepoint programs on perf-event links (the record is needed) |
| ``uprobe``/``uretprobe`` globs | one ``uprobe_multi`` link per binary (``uprobe`` session for ``--latency``) |
| ``kprobe``/``kretprobe`` globs | one ``kprobe_multi`` link (session for ``--latency``), else perf-event kprobes |
| ``fentry``/``fexit`` | one program per function (BPF trampolines) |
| ``profile``, ``software`` | a ``perf_event`` program on a sampling event per CPU |
"""

from __future__ import annotations

import enum
from typing import Any, Protocol

from ..abi.syscalls import syscall_number
from ..errors import NotFoundError, NotSupportedError, ParseError
from ..record import Value
from .spec import ProbeSpec, is_glob

__all__ = ["MODES", "Group", "Mechanism", "Probe", "Resolver", "TraceOptions", "plan"]

MODES = ("count", "latency", "args", "stacks")


class Mechanism(enum.StrEnum):
    """How a group of probes is attached (module table)."""

    SYS_ENTER = "sys_enter"
    SYS_EXIT = "sys_exit"
    RAW_TP = "raw_tp"
    TRACEPOINT = "tracepoint"
    UPROBE_MULTI = "uprobe_multi"
    UPROBE = "uprobe"
    KPROBE_MULTI = "kprobe_multi"
    KPROBE = "kprobe"
    FENTRY = "fentry"
    FEXIT = "fexit"
    SAMPLING = "sampling"


class Resolver(Protocol):
    """What planning asks of a kernel (both :class:`bpfmux.api.Kernel`
    implementations are resolvers; tests may pass their own)."""

    def tracepoint_names(self, pattern: str = "*:*") -> list[tuple[str, str]]:
        """``(category, name)`` of every tracepoint matching ``category:name`` globs."""
        ...

    def function_names(self, pattern: str) -> list[str]:
        """Traceable kernel functions matching a name or glob."""
        ...

    def supports(self, feature: str) -> bool:
        """Whether the kernel has ``feature`` (``kprobes``, ``kprobe_multi``,
        ``kprobe_session``, ``uprobe_multi``, ``uprobe_session``, ``fentry``)."""
        ...


class TraceOptions(Value):
    """What to trace and how (the command line's options).

    :ivar mode: one of :data:`MODES`.
    :ivar by: ``None``, ``"pid"`` or ``"comm"`` (count and latency modes).
    :ivar pid: only this process (tgid).
    :ivar comm: only processes with this command name.
    :ivar min_latency: latency mode: ignore calls faster than this (ns).
    :ivar skip_comm: ignore processes with this command name (``-c``'s
        child before its ``exec``: :data:`bpfmux.trace.child.HELD_COMM`).
    """

    __slots__ = ("mode", "by", "pid", "comm", "min_latency", "skip_comm")

    mode: str
    by: str | None
    pid: int | None
    comm: str | None
    min_latency: int
    skip_comm: str | None

    def __init__(
        self,
        mode: str = "count",
        by: str | None = None,
        pid: int | None = None,
        comm: str | None = None,
        min_latency: int = 0,
        skip_comm: str | None = None,
    ) -> None:
        self.mode = mode
        self.by = by
        self.pid = pid
        self.comm = comm
        self.min_latency = min_latency
        self.skip_comm = skip_comm


class Probe(Value):
    """One thing counted: a tracepoint, a function, a sampling event.

    :ivar idx: its index in the tracer's maps (the BPF cookie).
    :ivar name: display name (``tracepoint:sched:sched_switch``).
    :ivar info: what decoding its events needs (a tracepoint format, a BTF
        signature, a syscall number, …).
    """

    __slots__ = ("idx", "name", "info")

    idx: int
    name: str
    info: dict[str, Any]

    def __init__(self, idx: int, name: str, info: dict[str, Any] | None = None) -> None:
        self.idx = idx
        self.name = name
        self.info = {} if info is None else info


class Group(Value):
    """Probes attached together with one mechanism.

    :ivar how: the :class:`Mechanism`.
    :ivar targets: one attach target per probe (same order).
    :ivar retprobe: return probes (uretprobe, kretprobe).
    :ivar role: ``"main"`` (the group's action is the mode's), or in latency
        mode ``"session"``, ``"entry"``, ``"exit"``.
    """

    __slots__ = ("spec", "how", "probes", "targets", "retprobe", "role", "extra")

    spec: ProbeSpec
    how: Mechanism
    probes: list[Probe]
    targets: list[str]
    retprobe: bool
    role: str
    extra: dict[str, Any]

    def __init__(
        self,
        spec: ProbeSpec,
        how: Mechanism,
        probes: list[Probe],
        targets: list[str],
        retprobe: bool = False,
        role: str = "main",
        extra: dict[str, Any] | None = None,
    ) -> None:
        self.spec = spec
        self.how = how
        self.probes = probes
        self.targets = targets
        self.retprobe = retprobe
        self.role = role
        self.extra = {} if extra is None else extra


class _Index:
    def __init__(self) -> None:
        self.probes: list[Probe] = []
        self.by_name: dict[str, Probe] = {}

    def get(self, name: str, info: dict[str, Any] | None = None) -> tuple[Probe, bool]:
        if name in self.by_name:
            return self.by_name[name], False
        p = Probe(len(self.probes), name, info or {})
        self.probes.append(p)
        self.by_name[name] = p
        return p, True


def _tracepoints(spec: ProbeSpec, r: Resolver) -> list[tuple[str, str]]:
    found = r.tracepoint_names(f"{spec.category}:{spec.name}")
    if found:
        return found
    if is_glob(spec.category) or is_glob(spec.name):
        raise NotFoundError("tracepoint", spec.text, "the glob matches no tracepoint; list them with "
                            "'bpfmux trace -l' or 'bpftrace -l'")  # fmt: skip
    if not is_glob(spec.category) and not r.tracepoint_names(f"{spec.category}:*"):
        raise NotFoundError("tracepoint subsystem", spec.category, "this kernel has no tracepoints in that "
                            "subsystem; check the spelling")  # fmt: skip
    raise NotFoundError("tracepoint", spec.text, f"the {spec.category} subsystem has no tracepoint of that name; "
                        "check the spelling")  # fmt: skip


def _syscall_name(name: str) -> str:
    for p in ("sys_enter_", "sys_exit_"):
        if name.startswith(p):
            return name[len(p):]
    return name


def _require_kprobes(r: Resolver) -> None:
    if not r.supports("kprobes"):
        raise NotSupportedError("kprobe", "kprobe:/kretprobe: probes are not supported by this kernel (it was built "
                                "without CONFIG_KPROBES); use tracepoint: or rawtracepoint: probes instead")  # fmt: skip


def _require_fentry(kind: str, r: Resolver) -> None:
    if not r.supports("fentry"):
        raise NotSupportedError(kind, f"{kind}: probes are not supported by this kernel (no BPF trampolines: "
                                "fentry/fexit programs are refused); use tracepoint: or rawtracepoint: probes "
                                "instead")  # fmt: skip


def _kernel_functions(spec: ProbeSpec, r: Resolver) -> list[str]:
    base = spec.name.partition("+")[0] if not is_glob(spec.name) else spec.name
    return r.function_names(base)


def _uprobe_functions(spec: ProbeSpec) -> tuple[str, list[tuple[str, int]]]:
    """The functions a uprobe spec names. Aliases (``strtol``, ``strtoll``,
    ``strtoq`` at one address) are each a probe of their own, as in bpftrace:
    each fires on every call of the address.

    :raises NotFoundError: no such binary, symbol, or a glob matching nothing.
    """
    from ..host.targets import resolve_uprobe_targets

    try:
        groups = resolve_uprobe_targets([f"{spec.path}:{spec.name}"])
    except NotFoundError as e:
        if e.kind != "function symbol":
            raise
        listing = f"list its functions with 'bpfmux trace -l uprobe:{spec.path}:*'"
        if is_glob(spec.name):
            raise NotFoundError("function", spec.name, f"the glob matches nothing in {spec.path}; {listing}") from None
        raise NotFoundError("function", spec.name, f"{spec.path} has no such function; {listing}") from None
    (path, (funcs, _, _)), = groups.items()
    seen: dict[str, int] = {}
    for name, off in funcs:
        seen.setdefault(name, off)  # a symbol listed twice (versions, .symtab and .dynsym) is one probe
    return path, list(seen.items())


def plan(specs: list[ProbeSpec], opts: TraceOptions, resolver: Resolver) -> tuple[list[Group], list[Probe]]:
    """Expand every spec and choose a mechanism for each group of probes,
    asking ``resolver`` (the kernel) what exists and what it supports.

    :raises NotFoundError: a spec matches nothing.
    :raises NotSupportedError: the kernel lacks what a spec needs.
    :raises ParseError: the mode does not fit a probe kind.
    """
    if opts.mode not in MODES:
        raise ParseError(f"unknown mode {opts.mode!r}; one of {', '.join(MODES)}")
    index = _Index()
    groups: list[Group] = []
    for spec in specs:
        groups.extend(_plan_one(spec, opts, index, resolver))
    groups = _merge_syscall_groups([g for g in groups if g.probes])
    if not groups:
        raise NotFoundError("probe", " ".join(s.text for s in specs), "every spec matched only probes already given")
    return groups, index.probes


def _merge_syscall_groups(groups: list[Group]) -> list[Group]:
    """All syscall probes of one direction share one raw tracepoint program
    (two programs on ``sys_enter`` would both count every traced syscall)."""
    out: list[Group] = []
    first: dict[tuple[str, str], Group] = {}
    for g in groups:
        if g.how not in (Mechanism.SYS_ENTER, Mechanism.SYS_EXIT):
            out.append(g)
            continue
        key = (g.how, g.role)
        if key not in first:
            first[key] = g
            g.extra["specs"] = [g.spec.text]
            out.append(g)
            continue
        m = first[key]
        m.probes.extend(g.probes)
        m.targets.extend(g.targets)
        if g.spec.text not in m.extra["specs"]:
            m.extra["specs"].append(g.spec.text)
    return out


def _plan_one(spec: ProbeSpec, opts: TraceOptions, index: _Index, r: Resolver) -> list[Group]:
    mode = opts.mode
    k = spec.kind
    if k == "tracepoint":
        return _plan_tracepoints(spec, opts, index, r)
    if k == "rawtracepoint":
        if mode == "latency":
            raise ParseError(f"--latency needs function probes (uprobe, kprobe, fentry) or syscall tracepoints, "
                             f"not {spec.text!r}")  # fmt: skip
        if spec.category or is_glob(spec.name):
            pattern = f"{spec.category or '*'}:{spec.name}"
            names = sorted({n for _, n in r.tracepoint_names(pattern)})
            if not names:
                raise NotFoundError("raw tracepoint", spec.text, "the glob matches no tracepoint")
        else:
            names = [spec.name]
        g = Group(spec, Mechanism.RAW_TP, [], [])
        for n in names:
            p, new = index.get(f"rawtracepoint:{n}", {"raw_tp": n})
            if new:
                g.probes.append(p)
                g.targets.append(n)
        return [g]
    if k in ("uprobe", "uretprobe"):
        return _plan_uprobes(spec, opts, index, r)
    if k in ("kprobe", "kretprobe"):
        _require_kprobes(r)
        names = _kernel_functions(spec, r)
        offset = spec.name.partition("+")[2]
        multi = r.supports("kprobe_multi") and not offset
        out = []
        probes, targets = [], []
        for n in names:
            p, new = index.get(f"{'kprobe' if mode == 'latency' else k}:{n}", {"function": n})
            if new:
                probes.append(p)
                targets.append(n + (f"+{offset}" if offset else ""))
        if mode == "latency":
            if multi and r.supports("kprobe_session"):
                return [Group(spec, Mechanism.KPROBE_MULTI, probes, targets, role="session")]
            how = Mechanism.KPROBE_MULTI if multi else Mechanism.KPROBE
            return [Group(spec, how, probes, targets, role="entry"),
                    Group(spec, how, probes, targets, retprobe=True, role="exit")]  # fmt: skip
        out.append(Group(spec, Mechanism.KPROBE_MULTI if multi else Mechanism.KPROBE, probes, targets,
                         retprobe=k == "kretprobe"))
        return out
    if k in ("fentry", "fexit"):
        _require_fentry(k, r)
        names = _kernel_functions(spec, r)
        probes, targets = [], []
        for n in names:
            p, new = index.get(f"{'fentry' if mode == 'latency' else k}:{n}", {"function": n})
            if new:
                probes.append(p)
                targets.append(n)
        if mode == "latency":
            return [Group(spec, Mechanism.FENTRY, probes, targets, role="entry"),
                    Group(spec, Mechanism.FEXIT, probes, targets, role="exit")]  # fmt: skip
        return [Group(spec, Mechanism(k), probes, targets)]
    # profile / software
    if mode == "latency":
        raise ParseError(f"--latency needs function probes or syscall tracepoints, not {spec.text!r}")
    if mode == "args":
        raise ParseError(f"--args needs tracepoints or function probes, not {spec.text!r}")
    p, new = index.get(spec.canonical, {})
    return [Group(spec, Mechanism.SAMPLING, [p] if new else [], [spec.canonical])]


def _plan_tracepoints(spec: ProbeSpec, opts: TraceOptions, index: _Index, r: Resolver) -> list[Group]:
    mode = opts.mode
    found = _tracepoints(spec, r)
    enter = Group(spec, Mechanism.SYS_ENTER, [], [])
    exit_ = Group(spec, Mechanism.SYS_EXIT, [], [])
    other = Group(spec, Mechanism.TRACEPOINT if mode == "args" else Mechanism.RAW_TP, [], [])
    perf = Group(spec, Mechanism.TRACEPOINT, [], [])
    for cat, name in found:
        nr = syscall_number(name) if cat == "syscalls" else None
        if mode == "latency":
            if nr is None or not name.startswith(("sys_enter_", "sys_exit_")):
                raise ParseError(f"--latency needs function probes (uprobe, kprobe, fentry) or syscall tracepoints; "
                                 f"{cat}:{name} is neither")  # fmt: skip
            sc = _syscall_name(name)
            p, new = index.get(f"syscall:{sc}", {"syscall": nr})
            if new:
                enter.probes.append(p)
                enter.targets.append(name)
            continue
        full = f"tracepoint:{cat}:{name}"
        if nr is not None and name.startswith("sys_enter_"):
            p, new = index.get(full, {"syscall": nr, "tracepoint": (cat, name)})
            if new:
                enter.probes.append(p)
                enter.targets.append(name)
        elif nr is not None and name.startswith("sys_exit_"):
            p, new = index.get(full, {"syscall": nr, "tracepoint": (cat, name)})
            if new:
                exit_.probes.append(p)
                exit_.targets.append(name)
        elif cat == "syscalls":  # a syscall tracepoint bpfmux has no number for: its own perf event
            p, new = index.get(full, {"tracepoint": (cat, name)})
            if new:
                perf.probes.append(p)
                perf.targets.append(f"{cat}:{name}")
        else:
            p, new = index.get(full, {"tracepoint": (cat, name)})
            if new:
                other.probes.append(p)
                other.targets.append(f"{cat}:{name}")
    if mode == "latency":
        exit_.probes, exit_.targets = list(enter.probes), list(enter.targets)
        enter.role, exit_.role = "entry", "exit"
    return [g for g in (enter, exit_, other, perf) if g.probes]


def _plan_uprobes(spec: ProbeSpec, opts: TraceOptions, index: _Index, r: Resolver) -> list[Group]:
    mode = opts.mode
    path, funcs = _uprobe_functions(spec)
    kind = "uprobe" if mode == "latency" else spec.kind
    probes, targets = [], []
    for name, off in funcs:
        p, new = index.get(f"{kind}:{path}:{name}", {"function": name, "binary": path, "offset": off})
        if new:
            probes.append(p)
            targets.append(f"{path}:{off:#x}")
    multi = r.supports("uprobe_multi")
    how = Mechanism.UPROBE_MULTI if multi else Mechanism.UPROBE
    if mode == "latency":
        if multi and r.supports("uprobe_session"):
            return [Group(spec, how, probes, targets, role="session")]
        return [Group(spec, how, probes, targets, role="entry"),
                Group(spec, how, probes, targets, retprobe=True, role="exit")]  # fmt: skip
    return [Group(spec, how, probes, targets, retprobe=spec.kind == "uretprobe")]

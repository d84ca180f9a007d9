"""Links of the live kernel: one module per link kind, each a
:class:`~bpfmux.api.Link` (a context manager whose ``close()`` is idempotent).

:func:`attach` attaches one program by what it is (its type, its load-time
attach type, its ELF section name) to one target; :func:`attach_many` attaches
one program to many targets with the fastest mechanism the kernel offers
(:mod:`.multi`). A loaded program's ``attach``/``attach_many`` delegate here.

| kind | module | mechanism |
| --- | --- | --- |
| tracepoint | :mod:`.tracepoint` | perf event + ``BPF_PERF_EVENT`` link (ioctl fallback) |
| raw_tracepoint | :mod:`.raw_tracepoint` | ``BPF_RAW_TRACEPOINT_OPEN`` |
| tp_btf | :mod:`.tp_btf` | ``BPF_LINK_CREATE`` ``TRACE_RAW_TP`` |
| perf_event (sampling) | :mod:`.perf_event` | one perf event per CPU |
| uprobe / uretprobe | :mod:`.uprobe` | uprobe PMU perf event |
| uprobe_multi / uprobe_session | :mod:`.uprobe_multi` | ``BPF_LINK_CREATE`` uprobe_multi |
| kprobe / kretprobe | :mod:`.kprobe` | kprobe PMU perf event |
| kprobe_multi / kprobe_session | :mod:`.kprobe_multi` | ``BPF_LINK_CREATE`` kprobe_multi |
| fentry / fexit / fmod_ret / fsession | :mod:`.tracing` | BPF trampoline |
| tracing_multi | :mod:`.tracing_multi` | ``BPF_LINK_CREATE`` tracing_multi (2026 uapi) |
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...api import Link
from ...errors import NotSupportedError, ParseError
from ...uapi import AttachType, ProgType
from ._base import (
    FdLink,
    NotAProgramError,
    RawProgram,
    close_all,
    deferred_signals,
    expected_attach_type,
    prog_fd,
    prog_type,
    section_info,
)
from .multi import GroupLink, attach_many

if TYPE_CHECKING:  # pragma: no cover
    from .kprobe import KprobeLink, attach_kprobe
    from .kprobe_multi import KprobeMultiLink, attach_kprobe_multi
    from .perf_event import PerfEventLink, PerfSamplingLink, attach_perf_event, attach_sampling
    from .raw_tracepoint import RawTracepointLink, attach_raw_tracepoint
    from .tp_btf import TpBtfLink, attach_tp_btf
    from .tracepoint import TracepointLink, attach_tracepoint
    from .tracing import TracingLink, attach_tracing
    from .tracing_multi import TracingMultiLink, attach_tracing_multi
    from .uprobe import UprobeLink, attach_uprobe
    from .uprobe_multi import UprobeMultiLink, attach_uprobe_multi

# kind modules are imported on first use (start-up time matters to tools)
_LAZY = {
    "KprobeLink": "kprobe", "attach_kprobe": "kprobe",
    "KprobeMultiLink": "kprobe_multi", "attach_kprobe_multi": "kprobe_multi",
    "PerfEventLink": "perf_event", "PerfSamplingLink": "perf_event", "attach_perf_event": "perf_event",
    "attach_sampling": "perf_event",
    "RawTracepointLink": "raw_tracepoint", "attach_raw_tracepoint": "raw_tracepoint",
    "TpBtfLink": "tp_btf", "attach_tp_btf": "tp_btf",
    "TracepointLink": "tracepoint", "attach_tracepoint": "tracepoint",
    "TracingLink": "tracing", "attach_tracing": "tracing",
    "TracingMultiLink": "tracing_multi", "attach_tracing_multi": "tracing_multi",
    "UprobeLink": "uprobe", "attach_uprobe": "uprobe",
    "UprobeMultiLink": "uprobe_multi", "attach_uprobe_multi": "uprobe_multi",
}  # fmt: skip


def __getattr__(name: str) -> Any:
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{mod}"), name)
    globals()[name] = value
    return value


__all__ = [
    "FdLink",
    "GroupLink",
    "KprobeLink",
    "KprobeMultiLink",
    "NotAProgramError",
    "PerfEventLink",
    "PerfSamplingLink",
    "RawProgram",
    "RawTracepointLink",
    "TpBtfLink",
    "TracepointLink",
    "TracingLink",
    "TracingMultiLink",
    "UprobeLink",
    "UprobeMultiLink",
    "attach",
    "attach_kprobe",
    "attach_kprobe_multi",
    "attach_many",
    "attach_perf_event",
    "attach_raw_tracepoint",
    "attach_sampling",
    "attach_tp_btf",
    "attach_tracepoint",
    "attach_tracing",
    "attach_tracing_multi",
    "attach_uprobe",
    "attach_uprobe_multi",
    "close_all",
    "deferred_signals",
]


def attach(program: Any, target: str | None = None, **opts: Any) -> Link:
    """Attach ``program`` to ``target`` (default: the target its section
    name gives, as libbpf would: ``SEC("tracepoint/sched/sched_switch")``).

    How is decided by the program: tracepoint → :func:`attach_tracepoint`,
    raw_tp → :func:`attach_raw_tracepoint`, tp_btf / fentry / fexit /
    fmod_ret / fsession → trampoline links, ``*.multi`` programs → their multi
    link with ``target`` as one glob, kprobe-type → uprobe (``BIN:SYM``) or
    kprobe (``FUNC``), perf_event → sampling on every CPU (``target`` names
    the event, default ``cpu_clock``).

    :param opts: ``cookie``, ``retprobe``, ``pid``, ``via``, ``session``,
        sampling options (``sample_freq``, ``sample_period``, ``hardware``,
        ``cpus``).
    :raises NotSupportedError: the kernel lacks this attach kind.
    :raises NotFoundError: the target does not exist.
    :raises ParseError: no target given and the section names none.
    :raises NotAProgramError: ``program`` is not a loaded program (a ``TypeError``).
    :raises BpfError: the kernel refused.
    """
    ptype = prog_type(program)
    eat = expected_attach_type(program)
    info = section_info(program)
    if target is None and info is not None:
        target = info.target
    retprobe = bool(opts.pop("retprobe", info.retprobe if info is not None else False))

    def need() -> str:
        if not target:
            raise ParseError(f"no attach target for program {getattr(program, 'name', program)!r}: give one, "
                             "or load it from a section that names it")  # fmt: skip
        return target

    if ptype == ProgType.TRACEPOINT:
        from .tracepoint import attach_tracepoint

        return attach_tracepoint(program, need(), **opts)
    if ptype in (ProgType.RAW_TRACEPOINT, ProgType.RAW_TRACEPOINT_WRITABLE):
        from .raw_tracepoint import attach_raw_tracepoint

        return attach_raw_tracepoint(program, need(), **opts)
    if ptype == ProgType.TRACING:
        from .tp_btf import attach_tp_btf
        from .tracing import TRACING_KINDS, attach_tracing
        from .tracing_multi import MULTI_ATTACH_TYPES, attach_tracing_multi

        if eat == AttachType.TRACE_RAW_TP:
            return attach_tp_btf(program, target, **opts)
        if eat in TRACING_KINDS:
            return attach_tracing(program, target, **opts)
        if eat in MULTI_ATTACH_TYPES:
            cookie = opts.pop("cookie", None)
            return attach_tracing_multi(program, [need()], [cookie] if cookie is not None else None, **opts)
    if ptype == ProgType.KPROBE:
        from .kprobe import attach_kprobe
        from .kprobe_multi import attach_kprobe_multi
        from .uprobe import attach_uprobe
        from .uprobe_multi import attach_uprobe_multi

        cookie = opts.pop("cookie", None)
        cks = [cookie] if cookie is not None else None
        if eat in (AttachType.TRACE_UPROBE_MULTI, AttachType.TRACE_UPROBE_SESSION):
            return attach_uprobe_multi(program, [need()], cks, retprobe=retprobe, **opts)
        if eat in (AttachType.TRACE_KPROBE_MULTI, AttachType.TRACE_KPROBE_SESSION):
            return attach_kprobe_multi(program, [need()], cks, retprobe=retprobe, **opts)
        kind = info.attach_kind.value if info is not None and info.attach_kind is not None else None
        if kind == "usdt":
            raise NotSupportedError("usdt", "USDT probes are not implemented by bpfmux.live.links; attach the "
                                    "program as a uprobe on the probe's address instead")  # fmt: skip
        t = need()
        if kind == "ksyscall" and target == info.target:
            from ...host.kallsyms import syscall_function

            t = syscall_function(t)
        if ":" in t:
            return attach_uprobe(program, t, retprobe=retprobe, cookie=cookie, **opts)
        return attach_kprobe(program, t, retprobe=retprobe, cookie=cookie, **opts)
    if ptype == ProgType.PERF_EVENT:
        from .perf_event import attach_sampling

        return attach_sampling(program, target or "cpu_clock", **opts)
    prog_fd(program)
    name = ptype.name.lower() if ptype is not None else "unknown"
    raise NotSupportedError("attach", f"bpfmux.live.links cannot attach a {name} program "
                            f"(attach type {eat.name.lower() if eat is not None else 'none'})")  # fmt: skip


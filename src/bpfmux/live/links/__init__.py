"""Links of the live kernel: one module per link kind, each a
:class:`~bpfmux.api.Link` (a context manager whose ``close()`` is idempotent).

:class:`LiveLinker` is the live kernel's :class:`bpfmux.attach.Linker`: the
one attach dispatch (:mod:`bpfmux.attach`, on the program's attach kind)
calls it, for a loaded program's ``attach``/``attach_many`` and for the
module-level :func:`attach`/:func:`attach_many` here.

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

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ... import attach as _dispatch
from ...api import Link, MultiLink, Program
from ...errors import NotAProgramError
from ._base import FdLink, RawProgram, close_all, deferred_signals, prog_fd
from .multi import GroupLink, expand_raw_tracepoints, expand_tracepoints

if TYPE_CHECKING:  # pragma: no cover
    from ...uapi import AttachType
    from ..perf import PerfEvent
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
    "LINKER",
    "FdLink",
    "GroupLink",
    "LiveLinker",
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
    "prog_fd",
]


class LiveLinker:
    """The live kernel's :class:`bpfmux.attach.Linker`: each kind by its
    module (module table). Every attachment is made with Ctrl-C held back
    until its owner holds it."""

    def tracepoint(self, program: Program, target: str, *, cookie: int | None, via: str | None = None) -> Link:
        """A perf-event tracepoint link (:func:`attach_tracepoint`)."""
        from .tracepoint import attach_tracepoint

        with deferred_signals():
            return attach_tracepoint(program, target, cookie=cookie, via=via)

    def raw_tracepoint(self, program: Program, target: str, *, cookie: int | None) -> Link:
        """A raw tracepoint link (:func:`attach_raw_tracepoint`)."""
        from .raw_tracepoint import attach_raw_tracepoint

        with deferred_signals():
            return attach_raw_tracepoint(program, target, cookie=cookie)

    def tp_btf(self, program: Program, target: str | None, *, cookie: int | None) -> Link:
        """A BTF-typed tracepoint link (:func:`attach_tp_btf`)."""
        from .tp_btf import attach_tp_btf

        with deferred_signals():
            return attach_tp_btf(program, target, cookie=cookie)

    def trampoline(self, program: Program, target: str | None, *, cookie: int | None,
                   attach_type: AttachType | int | None = None) -> Link:
        """An fentry/fexit/fmod_ret/fsession link (:func:`attach_tracing`)."""
        from .tracing import attach_tracing

        with deferred_signals():
            return attach_tracing(program, target, cookie=cookie, attach_type=attach_type)

    def tracing_multi(self, program: Program, targets: list[str], cookies: Sequence[int] | None,
                      attach_type: AttachType | int | None = None) -> MultiLink:
        """A tracing_multi link (:func:`attach_tracing_multi`)."""
        from .tracing_multi import attach_tracing_multi

        with deferred_signals():
            return attach_tracing_multi(program, targets, cookies, attach_type=attach_type)

    def kprobe(self, program: Program, target: str, *, retprobe: bool, cookie: int | None,
               via: str | None = None) -> Link:
        """A perf-event kprobe (:func:`attach_kprobe`)."""
        from .kprobe import attach_kprobe

        with deferred_signals():
            return attach_kprobe(program, target, retprobe=retprobe, cookie=cookie, via=via)

    def kprobe_multi(self, program: Program, targets: list[str], cookies: Sequence[int] | None, *, retprobe: bool,
                     session: bool) -> MultiLink:
        """A kprobe_multi link (:func:`attach_kprobe_multi`)."""
        from .kprobe_multi import attach_kprobe_multi

        with deferred_signals():
            return attach_kprobe_multi(program, targets, cookies, retprobe=retprobe, session=session)

    def uprobe(self, program: Program, target: str, *, retprobe: bool, cookie: int | None, pid: int = -1,
               via: str | None = None) -> Link:
        """A perf-event uprobe (:func:`attach_uprobe`)."""
        from .uprobe import attach_uprobe

        with deferred_signals():
            return attach_uprobe(program, target, retprobe=retprobe, pid=pid, cookie=cookie, via=via)

    def uprobe_multi(self, program: Program, targets: list[str], cookies: Sequence[int] | None, *, retprobe: bool,
                     session: bool, pid: int = -1) -> MultiLink:
        """uprobe_multi links, one per binary (:func:`attach_uprobe_multi`)."""
        from .uprobe_multi import attach_uprobe_multi

        return attach_uprobe_multi(program, targets, cookies, retprobe=retprobe, session=session, pid=pid)

    def perf_event(self, program: Program, target: str, **opts: Any) -> Link:
        """Sampling on every CPU (:func:`attach_sampling`)."""
        from .perf_event import attach_sampling

        return attach_sampling(program, target, **opts)

    def perf_event_link(self, program: Program, event: PerfEvent, *, cookie: int | None, via: str | None = None) -> Link:
        """The program on an open :class:`~bpfmux.live.perf.PerfEvent` (:func:`attach_perf_event`)."""
        from .perf_event import attach_perf_event

        with deferred_signals():
            return attach_perf_event(program, event, cookie=cookie, via=via)

    def syscall_function(self, name: str) -> str:
        """From ``/proc/kallsyms`` (:func:`bpfmux.host.kallsyms.syscall_function`)."""
        from ...host.kallsyms import syscall_function

        return syscall_function(name)

    def expand_tracepoints(self, patterns: Sequence[str], *, raw: bool) -> list[str]:
        """From tracefs."""
        return expand_raw_tracepoints(patterns) if raw else expand_tracepoints(patterns)

    def group(self, program: Program, links: list[Link], targets: Sequence[str], *, mechanism: str,
              kind: str) -> MultiLink:
        """A :class:`GroupLink`; perf-event members close on several threads (their grace periods overlap)."""
        return GroupLink(program, links, targets, mechanism=mechanism, kind=kind,
                         parallel_close=mechanism == "perf_event")

    def close_all(self, links: Iterable[Link]) -> None:
        """:func:`close_all`, in parallel (perf-event links wait a grace period each)."""
        close_all(links, parallel=True)


#: the live kernel's linker
LINKER = LiveLinker()


def _program(program: object) -> Program:
    if not isinstance(program, Program):
        prog_fd(program)  # a clearer message for things that are not programs at all
        raise NotAProgramError(f"{program!r} is not a loaded program; load it (LiveKernel().load(...)) or wrap a "
                               "program fd in RawProgram")
    return program


def attach(program: Program, target: str | None = None, **opts: Any) -> Link:
    """Attach a live program (see :meth:`bpfmux.api.Program.attach`).

    :raises NotAProgramError: ``program`` is not a loaded program (a ``TypeError``).
    :raises InvalidArgumentError: no target given and the section names none.
    :raises NotSupportedError: the kernel lacks this attach kind.
    :raises NotFoundError: the target does not exist.
    :raises BpfError: the kernel refused.
    """
    return _dispatch.attach(LINKER, _program(program), target, **opts)


def attach_many(program: Program, targets: Iterable[str] | str, cookies: Sequence[int] | None = None,
                **opts: Any) -> MultiLink:
    """Attach a live program to many targets (see :meth:`bpfmux.api.Program.attach_many`).

    :raises NotAProgramError: ``program`` is not a loaded program (a ``TypeError``).
    :raises InvalidArgumentError: no targets, or cookies that do not match them.
    :raises NotSupportedError: no mechanism fits these targets.
    :raises NotFoundError: a target matches nothing.
    :raises BpfError: the kernel refused.
    """
    return _dispatch.attach_many(LINKER, _program(program), targets, cookies, **opts)

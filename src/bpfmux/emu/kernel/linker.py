"""The emulated kernel's :class:`bpfmux.attach.Linker`: the one attach
dispatch (:mod:`bpfmux.attach`) calls it to make emulated links.

| kind | what it makes |
| --- | --- |
| tracepoint | a perf event on the tracepoint and a :class:`~.links.TracepointLink` (the event's fd closed) |
| raw_tracepoint, tp_btf | a :class:`~.links.RawTracepointLink` (context size checked against the prototype) |
| trampoline | a :class:`~.links.TracingLink` through the trampoline policy |
| tracing_multi | a :class:`~.links.TracingMultiLink` on every matching function |
| kprobe | a kprobe perf event and a :class:`~.links.PerfEventLink` |
| kprobe_multi | a :class:`~.links.KprobeMultiLink` (sessions too) |
| perf_event | a sampling perf event (or the ``event=`` given) and a :class:`~.links.PerfEventLink` |
| uprobe | a uprobe perf event on the binary's function and a :class:`~.links.PerfEventLink` |
| uprobe_multi | a :class:`~.links.UprobeMultiLink` (sessions, pid filter too) |
"""

from __future__ import annotations

import errno
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ... import api
from ...api import close_all
from ...errors import BpfError, InvalidArgumentError, NotFoundError, NotSupportedError
from ...uapi import MAX_MULTI_FUNCS, AttachType, ProgType
from .hooks import EmuPerfEvent
from .links import (
    GroupLink,
    KprobeMultiLink,
    PerfEventLink,
    RawTracepointLink,
    TracepointLink,
    TracingLink,
    TracingMultiLink,
    UprobeMultiLink,
)
from .objects import EmulatedProgram
from .trampoline import Abi, Attachment, KernelFunction, ProgKind
from .trampoline.policy import bulk

if TYPE_CHECKING:  # pragma: no cover
    from .emulator import Emulator

__all__ = ["EmulatedLinker"]

_SINGLE = {AttachType.TRACE_FENTRY: ProgKind.FENTRY, AttachType.TRACE_FEXIT: ProgKind.FEXIT,
           AttachType.MODIFY_RETURN: ProgKind.FMOD_RET}
_MAINLINE_MULTI = {AttachType.TRACE_FENTRY_MULTI: ProgKind.MULTI_ENTRY,
                   AttachType.TRACE_FEXIT_MULTI: ProgKind.MULTI_EXIT}


def _emulated(program: api.Program) -> EmulatedProgram:
    if not isinstance(program, EmulatedProgram):
        raise InvalidArgumentError(f"{program!r} is not a program of the emulated kernel; load it with "
                                   "Emulator.load() or Emulator.load_program()")
    return program


class EmulatedLinker:
    """Makes the links of one :class:`~bpfmux.emu.Emulator` (module table)."""

    def __init__(self, emu: Emulator) -> None:
        self.emu = emu
        self.registry = emu.registry
        self.policy = emu.policy

    # -- tracepoints ----------------------------------------------------------

    def tracepoint(self, program: api.Program, target: str, *, cookie: int | None) -> api.Link:
        """A tracepoint program on its own perf event."""
        prog = _emulated(program)
        pe = self.emu.perf_event_open(tracepoint=target)
        try:
            return TracepointLink(self.registry, prog, pe, cookie or 0)
        finally:
            pe.close()

    def raw_tracepoint(self, program: api.Program, target: str, *, cookie: int | None) -> api.Link:
        """A raw tracepoint link.

        :raises BpfError: ``EINVAL`` the program reads more arguments than the tracepoint has.
        """
        prog = _emulated(program)
        ev = self.emu.tracepoints.get(target)
        nargs = self.emu.tracepoints.raw_nargs(target)
        if nargs is not None and prog.max_ctx_offset > 8 * nargs:
            raise BpfError(errno.EINVAL, f"{prog.name} reads {prog.max_ctx_offset} bytes of context, but raw "
                                         f"tracepoint {target} has {nargs} arguments ({8 * nargs} bytes)")
        return RawTracepointLink(self.registry, prog, ev, cookie or 0)

    def tp_btf(self, program: api.Program, target: str | None, *, cookie: int | None) -> api.Link:
        """A tp_btf program on the tracepoint it was loaded for."""
        return self.raw_tracepoint(program, _need(program, target), cookie=cookie)

    def expand_tracepoints(self, patterns: Sequence[str], *, raw: bool) -> list[str]:
        """From the emulated kernel's tracepoint formats."""
        return self.emu.tracepoints.expand(patterns, raw=raw)

    # -- trampolines ---------------------------------------------------------------

    def trampoline(self, program: api.Program, target: str | None, *, cookie: int | None) -> api.Link:
        """An fentry/fexit/fmod_ret program on its function.

        :raises NotSupportedError: an attach type the emulated trampolines do not run (fsession).
        :raises NotFoundError: no such function.
        """
        prog = _emulated(program)
        kind = _SINGLE.get(prog.attach_type) if prog.attach_type is not None else None
        if kind is None:
            name = prog.attach_type.name.lower() if prog.attach_type is not None else "none"
            raise NotSupportedError(f"tracing attach type {name}", f"{prog.name}: the emulated kernel has no "
                                    f"trampoline for attach type {name}")
        f = self.emu.function(_need(program, target))
        att = Attachment(prog, kind, self.policy.next_seq(), cookie=cookie or 0)
        return TracingLink(self.registry, self.policy, prog, f, att)

    def tracing_multi(self, program: api.Program, targets: list[str], cookies: Sequence[int] | None) -> api.MultiLink:
        """One tracing multi link on every function the names and globs match."""
        prog = _emulated(program)
        funcs = self.expand_functions(targets)
        if cookies is not None and len(cookies) != len(targets):
            raise InvalidArgumentError(f"{len(cookies)} cookies for {len(targets)} targets")
        if cookies is not None and len(funcs) != len(targets):  # a glob's cookie goes to each function it matches
            per = {f.name: c for t, c in zip(targets, cookies, strict=True) for f in self.expand_functions([t])}
            cookies = [per[f.name] for f in funcs]
        return self.link_tracing_multi(prog, [f.btf_id or f for f in funcs], cookies)

    def link_tracing_multi(self, prog: EmulatedProgram, ids: Sequence[int | KernelFunction],
                           cookies: Sequence[int] | None = None) -> TracingMultiLink:
        """``BPF_LINK_CREATE`` of a tracing multi link from BTF ids (see
        :meth:`bpfmux.emu.Emulator.link_tracing_multi`)."""
        if not prog.is_multi:
            raise BpfError(errno.EINVAL, f"{prog.name} is not a multi program (BPF_F_MULTI_FUNC or fentry.multi)")
        if not ids:
            raise BpfError(errno.EINVAL, "a tracing multi link needs at least one function")
        if len(ids) > MAX_MULTI_FUNCS:
            raise BpfError(errno.E2BIG, f"{len(ids)} functions; at most {MAX_MULTI_FUNCS} per link")
        if cookies is not None and len(cookies) != len(ids):
            raise BpfError(errno.EINVAL, f"{len(cookies)} cookies for {len(ids)} functions")
        functions = self.emu.functions
        funcs: list[KernelFunction] = []
        seen: set[KernelFunction] = set()
        with bulk():
            for i in ids:
                if isinstance(i, KernelFunction):
                    f = i
                elif functions.has_id(i):
                    f = functions.by_id(i)
                else:
                    raise BpfError(errno.EINVAL, f"BTF id {i} is not a function of this kernel")
                if f in seen:
                    raise BpfError(errno.EINVAL, f"{f.name} is listed twice")
                seen.add(f)
                funcs.append(f)
        at = prog.attach_type
        if at in _MAINLINE_MULTI:
            kind, abi = _MAINLINE_MULTI[AttachType(at)], Abi.MAINLINE
        elif at == AttachType.TRACE_FSESSION_MULTI:
            raise NotSupportedError("fsession.multi in the emulated kernel")
        else:
            kind = ProgKind.MULTI_EXIT if at == AttachType.TRACE_FEXIT else ProgKind.MULTI_ENTRY
            abi = Abi.SEED
        cmap = {f.addr: (cookies[i] if cookies else 0) for i, f in enumerate(funcs)}
        att = Attachment(prog, kind, self.policy.next_seq(), abi=abi, cookies=cmap)
        return TracingMultiLink(self.registry, self.policy, prog, funcs, att)

    def expand_functions(self, patterns: Iterable[str]) -> list[KernelFunction]:
        """Function names and globs → functions, each once, in order.

        :raises NotFoundError: a name or glob matching nothing.
        """
        out: list[KernelFunction] = []
        seen: set[KernelFunction] = set()
        for p in patterns:
            found = self.emu.functions.glob(p)
            if not found:
                raise NotFoundError("kernel function matching", p)
            for f in found:
                if f not in seen:
                    seen.add(f)
                    out.append(f)
        return out

    # -- kprobes ----------------------------------------------------------------

    def kprobe(self, program: api.Program, target: str, *, retprobe: bool, cookie: int | None) -> api.Link:
        """A kprobe (or kretprobe) perf event with the program on it."""
        prog = _emulated(program)
        f = self.emu.function(target)
        pe = self.emu.perf_event_open(kretprobe=f.name) if retprobe else self.emu.perf_event_open(kprobe=f.name)
        try:
            return PerfEventLink(self.registry, prog, pe, cookie or 0)
        finally:
            pe.close()

    def kprobe_multi(self, program: api.Program, targets: list[str], cookies: Sequence[int] | None, *,
                     retprobe: bool, session: bool) -> api.MultiLink:
        """One kprobe_multi link (fprobe) on every matching function."""
        prog = _emulated(program)
        if session and retprobe:
            raise InvalidArgumentError("a kprobe session runs on entry and return; do not ask for retprobe too")
        if prog.prog_type != ProgType.KPROBE:
            raise BpfError(errno.EINVAL, f"{prog.name} is not a kprobe program")
        funcs = self.expand_functions(targets)
        if cookies is not None and len(funcs) != len(targets):
            per = {f.name: c for t, c in zip(targets, cookies, strict=True) for f in self.expand_functions([t])}
            cookies = [per[f.name] for f in funcs]
        return KprobeMultiLink(self.registry, self.emu.kprobes, prog, funcs, cookies, retprobe, session)

    def syscall_function(self, name: str) -> str:
        """``__x64_sys_NAME`` when the function table has it, else ``sys_NAME``."""
        for cand in (f"__x64_sys_{name}", f"__se_sys_{name}", f"sys_{name}"):
            if cand in self.emu.functions:
                return cand
        return f"sys_{name}"

    # -- uprobes -------------------------------------------------------------------

    def uprobe(self, program: api.Program, target: str, *, retprobe: bool, cookie: int | None, pid: int = -1,
               via: str | None = None) -> api.Link:
        """A uprobe (or uretprobe) perf event on ``BINARY:SYMBOL`` with the program on it.

        :raises NotSupportedError: a pid filter (per-process uprobe perf events are not modelled).
        """
        prog = _emulated(program)
        if pid > 0:
            raise NotSupportedError("per-process uprobes in the emulated kernel",
                                    "attach as uprobe.multi to filter by pid in the emulated kernel")
        site = self.emu.user_functions.resolve(target)
        pe = EmuPerfEvent(self.registry, self.emu.uprobes.event(site, retprobe))
        try:
            return PerfEventLink(self.registry, prog, pe, cookie or 0)
        finally:
            pe.close()

    def uprobe_multi(self, program: api.Program, targets: list[str], cookies: Sequence[int] | None, *,
                     retprobe: bool, session: bool, pid: int = -1) -> api.MultiLink:
        """One uprobe_multi link on every function the targets name (globs allowed)."""
        prog = _emulated(program)
        if session and retprobe:
            raise InvalidArgumentError("a uprobe session runs on entry and return; do not ask for retprobe too")
        sites = self.emu.user_functions.expand(targets)
        if cookies is not None and len(sites) != len(targets):
            per = {f: c for t, c in zip(targets, cookies, strict=True) for f in self.emu.user_functions.expand([t])}
            cookies = [per[f] for f in sites]
        return UprobeMultiLink(self.registry, self.emu.uprobes, prog, sites, cookies, retprobe, session,
                               max(pid, 0))

    # -- perf events ----------------------------------------------------------------

    def perf_event(self, program: api.Program, target: str, *, cookie: int | None = None,
                   event: EmuPerfEvent | None = None, sample_period: int = 1, **opts: Any) -> api.Link:
        """The program on ``event``, or on a new sampling event ``target``
        (``cpu_clock``, …) whose fd the link then holds alone.

        :param opts: other sampling options of the live kernel
            (``sample_freq``, ``cpus``, ``pid``) are accepted and not modelled.
        """
        prog = _emulated(program)
        if event is not None:
            return self.perf_event_link(prog, event, cookie=cookie)
        pe = self.emu.perf_event_open(software=target, sample_period=sample_period)
        try:
            return PerfEventLink(self.registry, prog, pe, cookie or 0)
        finally:
            pe.close()

    def perf_event_link(self, program: api.Program, event: EmuPerfEvent, *, cookie: int | None) -> api.Link:
        """The program on an open perf event of this emulator (a ``BPF_PERF_EVENT`` link)."""
        if not isinstance(event, EmuPerfEvent) or event.registry is not self.registry:
            raise InvalidArgumentError(f"{event!r} is not a perf event of this emulator (Emulator.perf_event_open)")
        return PerfEventLink(self.registry, _emulated(program), event, cookie or 0)

    # -- groups -------------------------------------------------------------------

    def group(self, program: api.Program, links: list[api.Link], targets: Sequence[str], *, mechanism: str,
              kind: str) -> api.MultiLink:
        """A :class:`~.links.GroupLink`."""
        return GroupLink(program, links, targets, mechanism=mechanism, kind=kind)

    def close_all(self, links: Iterable[api.Link]) -> None:
        """Close every link, all of them even if one fails; raise the first error."""
        close_all(links)


def _need(program: api.Program, target: str | None) -> str:
    if not target:
        raise InvalidArgumentError(f"{program.name} (section {program.section!r}) has no attach target; pass one")
    return target

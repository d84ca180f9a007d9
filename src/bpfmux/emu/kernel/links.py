"""Links of the emulated kernel, one class per kind (all :class:`bpfmux.api.Link`).

Every link holds a reference on its program; :meth:`close` detaches exactly
what the link attached and drops that reference. A link reaches the kernel
only through what it is given: the :class:`~.registry.Registry` it registers
with, and the part it attaches to (the trampoline policy, a hook, the
kprobe dispatch).
"""

from __future__ import annotations

import errno
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ... import api
from ...api import close_all
from ...errors import BpfError
from ...uapi import AttachType
from .hooks import EmuPerfEvent, TraceEvent
from .trampoline import Attachment, KernelFunction

if TYPE_CHECKING:
    from .objects import EmulatedProgram
    from .probes import ProbeDispatch, Site
    from .registry import Registry
    from .trampoline.policy import TrampolinePolicy


class EmuLink(api.Link):
    """Common part: the program, the emulator, idempotent close."""

    kind = "link"

    def __init__(self, registry: Registry, prog: EmulatedProgram) -> None:
        prog.hold()
        self.registry = registry
        self._prog = prog
        self._closed = False
        registry.links.add(self)

    @property
    def program(self) -> EmulatedProgram:
        """The attached program."""
        return self._prog

    @property
    def closed(self) -> bool:
        """True once closed."""
        return self._closed

    def close(self) -> None:
        """Detach and drop the program reference (idempotent)."""
        if self._closed:
            return
        self._closed = True
        try:
            self._detach()
        finally:
            self.registry.links.discard(self)
            self._prog.release()

    def _unwind(self) -> None:
        """Undo the constructor's registration when attaching failed."""
        self._closed = True
        self.registry.links.discard(self)
        self._prog.release()

    def _detach(self) -> None:  # pragma: no cover - every kind overrides it
        raise NotImplementedError

    def __repr__(self) -> str:
        state = "closed" if self._closed else "attached"
        return f"<{type(self).__name__} {self._prog.name!r} {state}>"


_TRACING_KINDS = {AttachType.TRACE_FENTRY: "fentry", AttachType.TRACE_FEXIT: "fexit",
                  AttachType.MODIFY_RETURN: "fmod_ret", AttachType.TRACE_FSESSION: "fsession"}


class TracingLink(EmuLink):
    """fentry/fexit/fmod_ret on one function (``BPF_LINK_TYPE_TRACING``)."""

    kind = "tracing"  # fentry, fexit, fmod_ret or fsession once attached (as the live kernel names them)

    def __init__(self, registry: Registry, policy: TrampolinePolicy, prog: EmulatedProgram, func: KernelFunction,
                 att: Attachment) -> None:
        super().__init__(registry, prog)
        # the live kernel's names (fentry, fexit, fmod_ret, fsession)
        self.kind = _TRACING_KINDS.get(prog.attach_type, "tracing") if prog.attach_type is not None else "tracing"
        self.policy = policy
        self.func = func
        self.attachment = att
        try:
            policy.attach(func, att)
        except BaseException:
            self._unwind()
            raise

    def _detach(self) -> None:
        self.policy.detach(self.func, self.attachment)


class TracingMultiLink(EmuLink, api.MultiLink):
    """One multi program on many functions (``BPF_LINK_TYPE_TRACING_MULTI``)."""

    kind = "tracing_multi"
    mechanism = "tracing_multi"

    def __init__(self, registry: Registry, policy: TrampolinePolicy, prog: EmulatedProgram, funcs: Sequence[KernelFunction],
                 att: Attachment) -> None:
        super().__init__(registry, prog)
        self.policy = policy
        self.funcs = tuple(funcs)
        self.targets = tuple(f.name for f in funcs)
        self.attachment = att
        try:
            policy.attach_multi(att, self.funcs)
        except BaseException:
            self._unwind()
            raise

    def update(self, program: api.Program, old: api.Program | None = None) -> None:
        """Swap the program on every function at once (``BPF_LINK_UPDATE``).

        :raises BpfError: ``EPERM`` ``old`` is not the attached program;
            ``EINVAL`` the new program differs in type, attach type or flags.
        """
        from .objects import EmulatedProgram

        if self._closed:
            raise BpfError(errno.ENOLINK, "link is closed")
        if old is not None and old is not self._prog:
            raise BpfError(errno.EPERM, f"{old.name!r} is not the program attached by this link")
        new = program
        p = self._prog
        if not isinstance(new, EmulatedProgram) or new.kernel is not p.kernel:
            raise BpfError(errno.EINVAL, "the new program must be loaded in the same emulator")
        if (new.prog_type, new.attach_type, new.flags) != (p.prog_type, p.attach_type, p.flags):
            raise BpfError(errno.EINVAL, f"{new.name!r} differs from {p.name!r} in type, attach type or flags")
        new.hold()
        self.policy.replace_program(self.attachment, new)
        self._prog = new
        p.release()

    def _detach(self) -> None:
        self.policy.detach_multi(self.attachment)


class PerfEventLink(EmuLink):
    """A program on a perf event (``BPF_LINK_CREATE`` with ``BPF_PERF_EVENT``).

    The link owns the program it put on the hook; it also holds the perf
    event, so closing the event's fd does not detach it.
    """

    kind = "perf_event"

    def __init__(self, registry: Registry, prog: EmulatedProgram, event: EmuPerfEvent, cookie: int = 0) -> None:
        super().__init__(registry, prog)
        self.event = event
        try:
            event._attach(prog, self, cookie)
        except BaseException:
            self._unwind()
            raise
        event.hold()

    def _detach(self) -> None:
        if self.event.owner is self:
            self.event._detach()
        self.event.put()


class TracepointLink(PerfEventLink):
    """A tracepoint program on its own perf event (what ``attach()`` of a
    ``tracepoint/`` program makes: open the event, link, close the fd)."""

    kind = "tracepoint"


class RawTracepointLink(EmuLink):
    """raw_tp / tp_btf on one tracepoint."""

    kind = "raw_tracepoint"

    def __init__(self, registry: Registry, prog: EmulatedProgram, event: TraceEvent, cookie: int = 0) -> None:
        super().__init__(registry, prog)
        self.event = event
        self.cookie = cookie
        event.add_raw(self)

    def _detach(self) -> None:
        self.event.remove_raw(self)


class KprobeMultiLink(EmuLink, api.MultiLink):
    """kprobe_multi (fprobe): one kprobe program on many functions, partial ``pt_regs``.

    :ivar pid: only calls by this process (``uprobe_multi``; 0: every process).
    """

    kind = "kprobe_multi"
    mechanism = "kprobe_multi"

    def __init__(self, registry: Registry, probes: ProbeDispatch, prog: EmulatedProgram, funcs: Sequence[Site],
                 cookies: Sequence[int] | None, retprobe: bool, session: bool = False, pid: int = 0) -> None:
        super().__init__(registry, prog)
        self.probes = probes
        self.funcs = tuple(funcs)
        self.targets = tuple(f.name for f in funcs)
        self.cookies = {f.addr: (cookies[i] if cookies else 0) for i, f in enumerate(funcs)}
        self.retprobe = retprobe
        self.session = session
        self.pid = pid
        if session:
            self.kind = self.kind.replace("_multi", "_session")
        for f in self.funcs:
            probes.add_fprobe(f, self)

    def _detach(self) -> None:
        for f in self.funcs:
            self.probes.remove_fprobe(f, self)


class UprobeMultiLink(KprobeMultiLink):
    """uprobe_multi: one program on many user functions, full ``pt_regs``, optionally one process."""

    kind = "uprobe_multi"
    mechanism = "uprobe_multi"


class GroupLink(api.MultiLink):
    """Many single links closed as one (the per-target mechanisms)."""

    def __init__(self, program: api.Program, links: Sequence[api.Link], targets: Sequence[str], *, mechanism: str,
                 kind: str) -> None:
        self._program = program
        self.links = list(links)
        self.mechanism = mechanism
        self.kind = kind
        self.targets = tuple(targets)
        self._closed = False

    @property
    def program(self) -> api.Program:
        """The attached program."""
        return self._program

    @property
    def closed(self) -> bool:
        """True once closed."""
        return self._closed

    def close(self) -> None:
        """Close every member link, all of them even if one fails; idempotent.

        :raises BaseException: the first error a close raised.
        """
        if self._closed:
            return
        self._closed = True
        close_all(self.links)

    def __len__(self) -> int:
        return len(self.links)


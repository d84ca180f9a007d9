"""Links of the emulated kernel, one class per kind (all :class:`bpfmux.api.Link`).

Every link holds a reference on its program; :meth:`close` detaches exactly
what the link attached and drops that reference.
"""

from __future__ import annotations

import errno
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ... import api
from ...errors import BpfError, NotSupportedError
from .hooks import EmuPerfEvent, TraceEvent
from .trampoline import Attachment, KernelFunction

if TYPE_CHECKING:
    from .emulator import Emulator
    from .objects import EmulatedProgram


class EmuLink(api.Link):
    """Common part: the program, the emulator, idempotent close."""

    kind = "link"

    def __init__(self, emu: Emulator, prog: EmulatedProgram) -> None:
        prog.hold()
        self.emu = emu
        self._prog = prog
        self._closed = False
        emu._links.add(self)

    @property
    def program(self) -> EmulatedProgram:
        return self._prog

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._detach()
        finally:
            self.emu._links.discard(self)
            self._prog.release()

    def _detach(self) -> None:  # pragma: no cover - every kind overrides it
        raise NotImplementedError

    def __repr__(self) -> str:
        state = "closed" if self._closed else "attached"
        return f"<{type(self).__name__} {self._prog.name!r} {state}>"


class TracingLink(EmuLink):
    """fentry/fexit/fmod_ret on one function (``BPF_LINK_TYPE_TRACING``)."""

    kind = "tracing"

    def __init__(self, emu: Emulator, prog: EmulatedProgram, func: KernelFunction, att: Attachment) -> None:
        super().__init__(emu, prog)
        self.func = func
        self.attachment = att
        try:
            emu.policy.attach(func, att)
        except BaseException:
            self._closed = True
            emu._links.discard(self)
            prog.release()
            raise

    def _detach(self) -> None:
        self.emu.policy.detach(self.func, self.attachment)


class TracingMultiLink(EmuLink, api.MultiLink):
    """One multi program on many functions (``BPF_LINK_TYPE_TRACING_MULTI``)."""

    kind = "tracing_multi"
    mechanism = "tracing_multi"

    def __init__(self, emu: Emulator, prog: EmulatedProgram, funcs: Sequence[KernelFunction], att: Attachment) -> None:
        super().__init__(emu, prog)
        self.funcs = tuple(funcs)
        self.targets = tuple(f.name for f in funcs)
        self.attachment = att
        try:
            emu.policy.attach_multi(att, self.funcs)
        except BaseException:
            self._closed = True
            emu._links.discard(self)
            prog.release()
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
        if not isinstance(new, EmulatedProgram) or new.emu is not self.emu:
            raise BpfError(errno.EINVAL, "the new program must be loaded in the same emulator")
        p = self._prog
        if (new.prog_type, new.attach_type, new.flags) != (p.prog_type, p.attach_type, p.flags):
            raise BpfError(errno.EINVAL, f"{new.name!r} differs from {p.name!r} in type, attach type or flags")
        new.hold()
        self.emu.policy.replace_program(self.attachment, new)
        self._prog = new
        p.release()

    def _detach(self) -> None:
        self.emu.policy.detach_multi(self.attachment)


class PerfEventLink(EmuLink):
    """A program on a perf event (``BPF_LINK_CREATE`` with ``BPF_PERF_EVENT``).

    The link owns the program it put on the hook; it also holds the perf
    event, so closing the event's fd does not detach it.
    """

    kind = "perf_event"

    def __init__(self, emu: Emulator, prog: EmulatedProgram, event: EmuPerfEvent, cookie: int = 0) -> None:
        super().__init__(emu, prog)
        self.event = event
        try:
            event._attach(prog, self, cookie)
        except BaseException:
            self._closed = True
            emu._links.discard(self)
            prog.release()
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

    def __init__(self, emu: Emulator, prog: EmulatedProgram, event: TraceEvent, cookie: int = 0) -> None:
        super().__init__(emu, prog)
        self.event = event
        self.cookie = cookie
        event.add_raw(self)

    def _detach(self) -> None:
        self.event.remove_raw(self)


class KprobeMultiLink(EmuLink, api.MultiLink):
    """kprobe_multi (fprobe): one kprobe program on many functions, partial ``pt_regs``."""

    kind = "kprobe_multi"
    mechanism = "kprobe_multi"

    def __init__(self, emu: Emulator, prog: EmulatedProgram, funcs: Sequence[KernelFunction],
                 cookies: Sequence[int] | None, retprobe: bool, session: bool = False) -> None:
        super().__init__(emu, prog)
        self.funcs = tuple(funcs)
        self.targets = tuple(f.name for f in funcs)
        self.cookies = {f.addr: (cookies[i] if cookies else 0) for i, f in enumerate(funcs)}
        self.retprobe = retprobe
        self.session = session
        for f in self.funcs:
            emu._fprobes.setdefault(f, []).append(self)

    def _detach(self) -> None:
        for f in self.funcs:
            lst = self.emu._fprobes[f]
            lst.remove(self)
            if not lst:
                del self.emu._fprobes[f]


class GroupLink(api.MultiLink):
    """Many single links closed as one (the per-target fallback)."""

    kind = "group"

    def __init__(self, links: Sequence[api.Link], mechanism: str, targets: Sequence[str]) -> None:
        self.links = list(links)
        self.mechanism = mechanism
        self.targets = tuple(targets)
        self._closed = False

    @property
    def program(self) -> Any:
        return self.links[0].program

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for link in self.links:
            link.close()


def unsupported_update(kind: str) -> NotSupportedError:
    """The error of ``update`` on a link kind that cannot be updated."""
    return NotSupportedError(f"{kind} link update")

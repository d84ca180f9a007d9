"""Function probes of the emulated kernel, for kernel functions (kprobes) and
user functions (uprobes) alike: per-function entry and return events (with
program arrays, through perf events) and multi links (kprobe_multi/fprobe,
uprobe_multi, with sessions), run around a call in the kernel's order.

What differs between the two is given when a dispatch is made: the event
names (``kprobe:``/``uprobe:``), whether multi links see every register
(uprobe_multi does; kprobe_multi, the seed's "optimized fprobe", sees only
di, si, dx, cx, sp and ip), and the stack pointer programs see.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from ...uapi import ProgType
from ..vm.runtime import FuncCall, RunContext, TracingInfo
from .hooks import TraceEvent, kprobe_regs

if TYPE_CHECKING:  # pragma: no cover
    from ..vm.memory import AddressSpace, Region

__all__ = ["KSTACK_TOP", "USTACK_TOP", "ProbeDispatch", "Site"]

#: Stack pointer value kprobe programs see (an address in the kernel's stack area).
KSTACK_TOP = 0xFFFFC90000004000
#: Stack pointer value uprobe programs see (an address in a user stack).
USTACK_TOP = 0x00007FFFFFFF0000


def _call(ip: int, args: tuple[int, ...], ret: int | None = None) -> TracingInfo:
    """The traced call as the tracing helpers read it."""
    return FuncCall(ip, args, ret)  # type: ignore[return-value]  # TracingInfo declares nargs settable, FuncCall's is a property


class Site(Protocol):
    """A probed function: a kernel function, or a user function of a binary."""

    @property
    def name(self) -> str: ...

    @property
    def addr(self) -> int: ...


class ProbeDispatch:
    """The probe events and multi links of one kind (kprobes or uprobes) of one emulated kernel.

    :param space: the VM's address space (session cookies live there).
    :param kind: ``"kprobe"`` or ``"uprobe"`` (event names, ``kretprobe:``/``uretprobe:``).
    :param multi_full_regs: multi links see every register (uprobe_multi) or
        only the argument registers, sp and ip (kprobe_multi).
    :param stack_top: the ``sp`` programs see.
    :param tgid: the current process id (multi links may filter on it).
    """

    def __init__(self, space: AddressSpace, *, kind: str = "kprobe", multi_full_regs: bool = False,
                 stack_top: int = KSTACK_TOP, tgid: Callable[[], int] = lambda: 0) -> None:
        self.space = space
        self.kind = kind
        self.multi_full_regs = multi_full_regs
        self.stack_top = stack_top
        self.tgid = tgid
        self.events: dict[tuple[Site, bool], TraceEvent] = {}
        #: site → multi links on it (objects with ``program``, ``cookies`` by
        #: address, ``retprobe``, ``session`` and ``pid``)
        self.fprobes: dict[Site, list[Any]] = {}

    def event(self, f: Site, retprobe: bool) -> TraceEvent:
        """The entry (or return) event of ``f``, made on first use."""
        ev = self.events.get((f, retprobe))
        if ev is None:
            name = f"{self.kind[0]}retprobe" if retprobe else self.kind
            ev = self.events[(f, retprobe)] = TraceEvent(f"{name}:{f.name}", ProgType.KPROBE, func=f,
                                                        retprobe=retprobe)
        return ev

    def _links(self, f: Site) -> list[Any]:
        tgid = self.tgid()
        return [link for link in self.fprobes.get(f, ()) if link.pid <= 0 or link.pid == tgid]

    def add_fprobe(self, f: Site, link: Any) -> None:
        """Register a kprobe_multi link on ``f``."""
        self.fprobes.setdefault(f, []).append(link)

    def remove_fprobe(self, f: Site, link: Any) -> None:
        """Unregister a kprobe_multi link from ``f``."""
        lst = self.fprobes[f]
        lst.remove(link)
        if not lst:
            del self.fprobes[f]

    def probed(self, f: Site) -> bool:
        """True when any kprobe, kretprobe or fprobe is on ``f``."""
        return (f, False) in self.events or (f, True) in self.events or f in self.fprobes

    def entry(self, f: Site, args: tuple[int, ...]) -> list[tuple[Any, Region]]:
        """Run the entry probes of a call: kprobes (full ``pt_regs``), then
        fprobes (partial ``pt_regs``); returns the sessions that asked for
        their return probe (entry program returned 0) with their cookie slot."""
        ev = self.events.get((f, False))
        if ev is not None and ev.array.items:
            ctx = kprobe_regs(f.addr, args, full=True, sp=self.stack_top)
            for prog, _, cookie in list(ev.array.items):
                prog.run(ctx, context=RunContext(tracing=_call(f.addr, args), cookie=cookie))
            ev.hits += 1
        sessions = []
        for link in self._links(f):
            if link.retprobe and not link.session:
                continue
            ctx = kprobe_regs(f.addr, args, full=self.multi_full_regs, sp=self.stack_top)
            rc = RunContext(tracing=_call(f.addr, args), cookie=link.cookies.get(f.addr, 0))
            slot = None
            if link.session:  # the u64 bpf_session_cookie() points at, kept from entry to return
                slot = self.space.map(bytearray(8), f"session cookie of {link.program.name}", "kernel", True)
                rc.session_cookie = slot.base
            r0 = link.program.run(ctx, context=rc)
            if slot is not None:
                if r0 == 0:
                    sessions.append((link, slot))
                else:
                    self.space.unmap(slot)
        return sessions

    def exit(self, f: Site, args: tuple[int, ...], ret: int,
             sessions: list[tuple[Any, Region]] | None) -> None:
        """Run the return probes: kretprobes, then return fprobes and the
        sessions' return half; session cookie slots are freed."""
        ev = self.events.get((f, True))
        if ev is not None and ev.array.items:
            ctx = kprobe_regs(f.addr, args, full=True, ret=ret, sp=self.stack_top)
            for prog, _, cookie in list(ev.array.items):
                prog.run(ctx, context=RunContext(tracing=_call(f.addr, args, ret), cookie=cookie))
            ev.hits += 1
        pending = dict(sessions or ())
        try:
            for link in self._links(f):
                if link.session:
                    if link not in pending:
                        continue
                elif not link.retprobe:
                    continue
                ctx = kprobe_regs(f.addr, args, full=self.multi_full_regs, ret=ret, sp=self.stack_top)
                rc = RunContext(tracing=_call(f.addr, args, ret), cookie=link.cookies.get(f.addr, 0),
                                session_is_return=True)
                if link.session:
                    rc.session_cookie = pending[link].base
                link.program.run(ctx, context=rc)
        finally:
            for slot in pending.values():
                self.space.unmap(slot)

"""Links through a perf event: a program on a tracepoint, uprobe, kprobe or
sampling event.

The modern way is a ``BPF_LINK_CREATE`` with ``BPF_PERF_EVENT`` (a
``bpf_link`` that also carries a BPF cookie); kernels before 5.15 only have the
``PERF_EVENT_IOC_SET_BPF`` ioctl, used as the fallback. Either way the link
owns the perf event and closes it last.

Many programs may run on one tracepoint or probe: each attachment goes through
its own perf event, and closing one removes exactly its own program (the
kernel's per-event program array, at most 64 programs, run in attach order;
:meth:`PerfEventLink.query` lists them).
"""

from __future__ import annotations

import errno as _errno
from typing import TYPE_CHECKING, TypeVar, overload

from ...errors import BpfError, InvalidArgumentError, NotSupportedError
from ...host.cpus import online_cpus
from .. import perf as _perf
from .. import sys as _sys
from ._base import FdLink, close_all, prog_fd
from .multi import GroupLink

if TYPE_CHECKING:
    from ...api import Program

__all__ = ["PerfEventLink", "PerfSamplingLink", "attach_perf_event", "attach_sampling"]


class PerfEventLink(FdLink):
    """A program attached to one perf event.

    :ivar event: the :class:`~bpfmux.live.perf.PerfEvent` (owned).
    :ivar via: ``"link"`` (a ``bpf_link``) or ``"ioctl"`` (``PERF_EVENT_IOC_SET_BPF``).
    """

    kind = "perf_event"

    def __init__(self, program: Program, event: _perf.PerfEvent, link_fd: _sys.Fd | None, cookie: int | None,
                 kind: str | None = None) -> None:  # fmt: skip
        super().__init__(program, link_fd, event.target, owned=[event], cookie=cookie)
        self.event = event
        self.via = "link" if link_fd is not None else "ioctl"
        if kind:
            self.kind = kind

    def query(self, capacity: int = 64) -> list[int]:
        """Ids of every program running on this event's tracepoint/probe, in
        run (= attach) order (``PERF_EVENT_IOC_QUERY_BPF``).

        :raises BpfError: ``ENOSPC`` more than ``capacity`` programs,
            ``EINVAL`` a sampling event (no program array).
        """
        return self.event.query_bpf(capacity)


_P = TypeVar("_P", bound=PerfEventLink)


@overload
def attach_perf_event(program: Program, event: _perf.PerfEvent, *, cookie: int | None = None, via: str | None = None,
                      kind: str | None = None, cls: None = None) -> PerfEventLink: ...


@overload
def attach_perf_event(program: Program, event: _perf.PerfEvent, *, cookie: int | None = None, via: str | None = None,
                      kind: str | None = None, cls: type[_P]) -> _P: ...


def attach_perf_event(program: Program, event: _perf.PerfEvent, *, cookie: int | None = None, via: str | None = None,
                      kind: str | None = None, cls: type[PerfEventLink] | None = None) -> PerfEventLink:  # fmt: skip
    """Attach ``program`` to an open perf event, which the link then owns
    (it is closed on failure too).

    :param via: ``"link"`` or ``"ioctl"`` to force a mechanism; ``None`` tries
        a ``bpf_link`` and falls back to the ioctl on kernels without
        perf-event links.
    :param cls: the link class to return (a :class:`PerfEventLink` subclass).
    :raises InvalidArgumentError: a bad ``via``, or a cookie with ``via="ioctl"``
        (a ``ValueError``).
    :raises NotSupportedError: a cookie was asked for on a kernel without
        perf-event links.
    :raises BpfError: ``EEXIST`` the event already has a program, ``E2BIG`` the
        hook already runs 64 programs, ``EINVAL`` wrong program type.
    """
    if via not in (None, "link", "ioctl"):
        event.close()
        raise InvalidArgumentError(f"via must be 'link', 'ioctl' or None, not {via!r}")
    if via == "ioctl" and cookie:
        event.close()
        raise InvalidArgumentError("PERF_EVENT_IOC_SET_BPF cannot carry a BPF cookie; attach with via='link' (or None)")
    link_fd: _sys.Fd | None = None
    try:
        pfd = prog_fd(program)
        if via != "ioctl":
            try:
                link_fd = _sys.link_create_perf_event(pfd, event.fd, cookie or 0)
            except BpfError as e:
                # kernels before 5.15 answer EINVAL to BPF_PERF_EVENT links
                if via == "link" or e.errno != _errno.EINVAL:
                    raise
                if cookie:
                    _link_or_type_error(pfd, event, e)
        if link_fd is None:
            if cookie:
                raise NotSupportedError("bpf_cookie", "BPF cookies need perf-event links (Linux 5.15+)")
            event.set_bpf(pfd)
        event.enable()
    except BaseException:
        if link_fd is not None:
            link_fd.close()
        event.close()
        raise
    return (cls or PerfEventLink)(program, event, link_fd, cookie, kind or event.kind)


def _link_or_type_error(pfd: int, event: _perf.PerfEvent, err: BpfError) -> None:
    """EINVAL from a perf-event link with a cookie: find out whether the
    program type is wrong (the ioctl says so too) or links are missing."""
    try:
        event.set_bpf(pfd)
    except BpfError:
        raise err from None
    raise NotSupportedError("bpf_cookie", f"BPF cookies need perf-event links (Linux 5.15+): {err}")


class PerfSamplingLink(GroupLink[PerfEventLink]):
    """A ``perf_event`` program on a sampling event, one perf event per CPU
    (a :class:`~bpfmux.live.links.multi.GroupLink` of them, closed together).

    :ivar links: the per-CPU :class:`PerfEventLink`\\ s.
    """

    def __init__(self, program: Program, links: list[PerfEventLink], name: str) -> None:
        super().__init__(program, links, [f"{name}@cpu{link.event.cpu}" for link in links],
                         mechanism="perf_event", kind="perf_event")

    def __repr__(self) -> str:
        return f"<PerfSamplingLink {len(self.links)} CPUs {'closed' if self._closed else 'open'}>"


def attach_sampling(program: Program, event: str | int = "cpu_clock", *, hardware: bool = False,
                    sample_period: int | None = None, sample_freq: int | None = None,
                    cpus: list[int] | None = None, pid: int = -1, cookie: int | None = None,
                    via: str | None = None) -> PerfSamplingLink:  # fmt: skip
    """Attach a ``perf_event`` program to a software (or hardware) sampling
    event on every online CPU (or ``cpus``). All or nothing.

    :param event: a :class:`~bpfmux.uapi.PerfSwId`/:class:`~bpfmux.uapi.PerfHwId`
        name (``"cpu_clock"``, ``"cpu_cycles"``) or number.
    :raises NotSupportedError: no hardware PMU (``hardware=True`` in a VM).
    :raises BpfError: the kernel refused.
    """
    from ...uapi import PerfHwId, PerfSwId

    enum_cls = PerfHwId if hardware else PerfSwId
    if isinstance(event, str):
        try:
            config = enum_cls[event.upper()]
        except KeyError:
            raise InvalidArgumentError(f"unknown {'hardware' if hardware else 'software'} event {event!r}; "
                             f"known: {[m.name.lower() for m in enum_cls]}") from None  # fmt: skip
    else:
        config = enum_cls(event)
    if sample_period is None and sample_freq is None:
        sample_freq = 99
    opener = _perf.open_hardware if hardware else _perf.open_software
    links: list[PerfEventLink] = []
    try:
        for cpu in cpus if cpus is not None else online_cpus():
            ev = opener(config, cpu, pid, sample_period=sample_period, sample_freq=sample_freq)
            links.append(attach_perf_event(program, ev, cookie=cookie, via=via, kind="perf_event"))
    except BaseException:
        close_all(links)
        raise
    return PerfSamplingLink(program, links, config.name.lower())

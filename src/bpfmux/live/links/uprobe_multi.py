"""uprobe_multi and uprobe session links: one kprobe-type program (loaded
with attach type ``BPF_TRACE_UPROBE_MULTI`` or ``BPF_TRACE_UPROBE_SESSION``)
on many functions of one binary, in one ``BPF_LINK_CREATE``, with a BPF
cookie per function and an optional pid filter.

Targets are ``BINARY:SYMBOL``, ``BINARY:GLOB`` (``libc.so.6:str*``, matched
over the ELF's ``.dynsym``/``.symtab``/debug symbols), ``BINARY:SYMBOL+OFF``
or ``BINARY:0xFILEOFFSET``; targets on several binaries give one kernel link
per binary, held as one :class:`~bpfmux.api.MultiLink`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ...api import MultiLink
from ...errors import BpfError, InvalidArgumentError, NotSupportedError
from ...host.targets import resolve_uprobe_targets
from ...uapi import AttachType
from .. import sys as _sys
from ._base import UNSUPPORTED_ERRNOS, FdLink, close_all, deferred_signals, prog_fd

if TYPE_CHECKING:
    from ...api import Program

__all__ = ["UprobeMultiLink", "attach_uprobe_multi"]


class UprobeMultiLink(FdLink, MultiLink):
    """One ``uprobe_multi`` kernel link on one binary.

    :ivar binary: the binary's path.
    :ivar functions: ``(name, file offset)`` of every probed location, in
        link order (``name`` is ``"0x…"`` for raw offsets).
    :ivar cookies: the cookie of each location (``None``: no cookies).
    :ivar session: True for a uprobe session link.
    :ivar retprobe: True for uretprobes.
    """

    kind = "uprobe_multi"
    mechanism = "uprobe_multi"

    def __init__(self, program: Program, fd: _sys.Fd, binary: str, functions: list[tuple[str, int]],
                 cookies: list[int] | None, targets: Sequence[str], *, session: bool, retprobe: bool,
                 pid: int) -> None:  # fmt: skip
        super().__init__(program, fd, f"{binary}:{len(functions)} functions")
        self.binary = binary
        self.functions = functions
        self.cookies = cookies
        self.targets = tuple(targets)
        self.session = session
        self.retprobe = retprobe
        self.pid = pid
        if session:
            self.kind = "uprobe_session"


def attach_uprobe_multi(program: Program, targets: Sequence[str] | str, cookies: Sequence[int] | None = None, *,
                        retprobe: bool = False, session: bool | None = None, pid: int = -1
                        ) -> UprobeMultiLink | MultiLink:  # fmt: skip
    """Attach to every target at once (see module doc). All or nothing.

    :param session: a uprobe session link (default: what the program was
        loaded for).
    :param pid: only this process (``-1``: every process).
    :raises NotSupportedError: the kernel has no uprobe_multi.
    :raises NotFoundError: no such binary or symbol.
    :raises BpfError: the kernel refused (``EINVAL``: the program was not
        loaded as uprobe.multi, or a bad offset; ``ESRCH``: no such pid).
    """
    if isinstance(targets, str):
        targets = [targets]
    targets = list(targets)
    if not targets:
        raise InvalidArgumentError("no uprobe targets given")
    eat = program.attach_type
    if session is None:
        session = eat == AttachType.TRACE_UPROBE_SESSION
    if session and retprobe:
        raise InvalidArgumentError("a uprobe session runs on entry and return; do not ask for retprobe too")
    pfd = prog_fd(program)
    groups = resolve_uprobe_targets(targets, cookies)
    links: list[UprobeMultiLink] = []
    try:
        for path, (funcs, cks, tg) in groups.items():
            with deferred_signals():
                try:
                    fd = _sys.link_create_uprobe_multi(
                        pfd, path, [off for _, off in funcs], cookies=cks, pid=max(pid, 0), retprobe=retprobe,
                        session=session,
                    )
                except BpfError as e:
                    if e.errno in UNSUPPORTED_ERRNOS:
                        kind = "uprobe sessions" if session else "uprobe_multi"
                        raise NotSupportedError(kind, f"this kernel cannot attach {kind} ({e})") from e
                    raise
                links.append(UprobeMultiLink(program, fd, path, funcs, cks, tg, session=session,
                                             retprobe=retprobe, pid=pid))  # fmt: skip
    except BaseException:
        close_all(links, parallel=True)
        raise
    if len(links) == 1:
        return links[0]
    from .multi import GroupLink

    return GroupLink(program, links, targets, mechanism="uprobe_multi", kind=links[0].kind, parallel_close=True)

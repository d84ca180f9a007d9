"""Uprobe/uretprobe links: a kprobe-type program on one instruction of a user
binary, through the uprobe PMU's perf event (the target is a file and an
offset in it, so every process mapping the file is traced unless a ``pid``
is given).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...host.targets import resolve_uprobe
from .. import perf as _perf
from ._base import prog_fd
from .perf_event import PerfEventLink, attach_perf_event

if TYPE_CHECKING:
    from ...api import Program

__all__ = ["UprobeLink", "attach_uprobe"]


class UprobeLink(PerfEventLink):
    """A program on one uprobe or uretprobe (owns its perf event).

    :ivar binary: the resolved binary path.
    :ivar offset: the file offset probed.
    """

    kind = "uprobe"
    binary: str = ""
    offset: int = 0


def attach_uprobe(program: Program, target: str, *, retprobe: bool = False, pid: int = -1, cookie: int | None = None,
                  ref_ctr_offset: int = 0, via: str | None = None) -> UprobeLink:  # fmt: skip
    """Attach to ``BINARY:SYMBOL[+OFFSET]`` or ``BINARY:0xFILEOFFSET``.

    :param pid: only this process (``-1``: all).
    :raises NotSupportedError: no uprobe PMU.
    :raises NotFoundError: no such binary or symbol.
    :raises BpfError: the kernel refused.
    """
    prog_fd(program)
    path, offset = resolve_uprobe(target)
    event = _perf.open_uprobe(path, offset, retprobe=retprobe, pid=pid, ref_ctr_offset=ref_ctr_offset)
    link = attach_perf_event(program, event, cookie=cookie, via=via, kind="uretprobe" if retprobe else "uprobe",
                             cls=UprobeLink)  # fmt: skip
    link.binary, link.offset = path, offset
    link.target = target
    return link

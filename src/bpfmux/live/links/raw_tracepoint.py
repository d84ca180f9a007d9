"""Raw tracepoint links: a ``BPF_PROG_TYPE_RAW_TRACEPOINT`` program sees the
tracepoint's C arguments (``u64 args[]``) and attaches with
``BPF_RAW_TRACEPOINT_OPEN``. Attach and detach take well under a
millisecond (no perf event, no grace-period wait on the caller's side), so
this is the fast way to cover many tracepoints.
"""

from __future__ import annotations

import errno as _errno
from typing import TYPE_CHECKING

from ...errors import BpfError, NotFoundError, NotSupportedError
from .. import sys as _sys
from ._base import FdLink, prog_fd

if TYPE_CHECKING:
    from ...api import Program

__all__ = ["RawTracepointLink", "attach_raw_tracepoint"]


class RawTracepointLink(FdLink):
    """A raw tracepoint program on one tracepoint (by its bare name, e.g.
    ``"sched_switch"`` or ``"sys_enter"``)."""

    kind = "raw_tracepoint"


def attach_raw_tracepoint(program: Program, name: str, *, cookie: int | None = None) -> RawTracepointLink:
    """Attach to the raw tracepoint ``name``; a ``category:`` prefix is ignored.

    :raises NotFoundError: no such tracepoint.
    :raises NotSupportedError: a cookie on a kernel without raw_tp cookies (6.10+).
    :raises BpfError: the kernel refused.
    """
    bare = name.rsplit(":", 1)[-1].rsplit("/", 1)[-1]
    if not bare:
        raise NotFoundError("raw tracepoint", name, "give a tracepoint name such as 'sched_switch'")
    try:
        fd = _sys.raw_tracepoint_open(bare, prog_fd(program), cookie or 0)
    except BpfError as e:
        if e.errno == _errno.ENOENT:
            raise NotFoundError("raw tracepoint", bare, "list them with 'bpfmux trace -l'") from e
        if e.errno == _errno.EINVAL and cookie:
            raise NotSupportedError("raw_tp cookie", f"raw tracepoint cookies need Linux 6.10+ ({e})") from e
        raise
    return RawTracepointLink(program, fd, bare, cookie=cookie)

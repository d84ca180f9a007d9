"""BTF-typed tracepoint links (``tp_btf``): a ``BPF_PROG_TYPE_TRACING``
program with attach type ``BPF_TRACE_RAW_TP``, bound at load time to the
tracepoint's ``btf_trace_<name>`` type, so its arguments are typed.
"""

from __future__ import annotations

import errno as _errno
from typing import TYPE_CHECKING

from ...errors import BpfError, NotSupportedError
from ...uapi import AttachType
from .. import sys as _sys
from ._base import UNSUPPORTED_ERRNOS, FdLink, prog_fd

if TYPE_CHECKING:
    from ...api import Program

__all__ = ["TpBtfLink", "attach_tp_btf"]


class TpBtfLink(FdLink):
    """A tp_btf program on the tracepoint it was loaded for."""

    kind = "tp_btf"


def attach_tp_btf(program: Program, target: str | None = None, *, cookie: int | None = None) -> TpBtfLink:
    """Attach a tp_btf program (its target was fixed at load time; ``target``
    only names it in messages).

    Uses ``BPF_LINK_CREATE`` (which carries the cookie) and falls back to
    ``BPF_RAW_TRACEPOINT_OPEN`` on kernels that only know that.

    :raises NotSupportedError: the kernel has no BTF-typed tracepoints.
    :raises BpfError: the kernel refused.
    """
    pfd = prog_fd(program)
    try:
        fd = _sys.link_create_tracing(pfd, AttachType.TRACE_RAW_TP, cookie=cookie or 0)
    except BpfError as e:
        if e.errno in UNSUPPORTED_ERRNOS:
            raise NotSupportedError("tp_btf", f"this kernel cannot attach tp_btf programs ({e})") from e
        if e.errno != _errno.EINVAL or cookie:
            raise
        fd = _sys.raw_tracepoint_open(None, pfd)
    name = target or program.section or "tp_btf"
    return TpBtfLink(program, fd, name, cookie=cookie)

"""fentry/fexit/fmod_ret/fsession links: a ``BPF_PROG_TYPE_TRACING``
program bound at load time to one kernel function (by BTF id), attached
through the kernel's BPF trampoline with ``BPF_LINK_CREATE``.

Kernels without trampolines (or with them disabled) refuse at load time
(``EPERM``/``ENOTSUPP``); attaching first asks the feature probes
(:mod:`bpfmux.live.features`, which try a real fentry link) and raises
:class:`~bpfmux.errors.NotSupportedError` when the kernel has none.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...errors import BpfError, InvalidArgumentError, NotSupportedError
from ...uapi import AttachType, LinkType
from .. import sys as _sys
from ..features import features
from ._base import UNSUPPORTED_ERRNOS, FdLink, prog_fd

if TYPE_CHECKING:
    from ...api import Program

__all__ = ["TRACING_KINDS", "TracingLink", "attach_tracing"]

#: attach type → link kind name
TRACING_KINDS = {
    AttachType.TRACE_FENTRY: "fentry",
    AttachType.TRACE_FEXIT: "fexit",
    AttachType.MODIFY_RETURN: "fmod_ret",
    AttachType.TRACE_FSESSION: "fsession",
}


class TracingLink(FdLink):
    """An fentry/fexit/fmod_ret/fsession program on its function."""

    kind = "fentry"


def attach_tracing(program: Program, target: str | None = None, *, attach_type: AttachType | int | None = None,
                   cookie: int | None = None) -> TracingLink:  # fmt: skip
    """Attach a tracing program to the function it was loaded for.

    :param attach_type: overrides the program's expected attach type.
    :raises InvalidArgumentError: not an fentry/fexit/fmod_ret/fsession attach type
        (a ``ValueError``).
    :raises NotSupportedError: this kernel has no BPF trampolines (or not
        this attach type).
    :raises BpfError: the kernel refused otherwise.
    """
    at = AttachType(int(attach_type)) if attach_type is not None else program.attach_type
    if at not in TRACING_KINDS:
        raise InvalidArgumentError(f"not an fentry/fexit/fmod_ret/fsession program (attach type {at!r}); "
                         "load it from such a section or pass attach_type=")
    kind = TRACING_KINDS[at]
    try:
        features().require("link_type", LinkType.TRACING)
    except NotSupportedError as e:
        raise NotSupportedError(kind, f"this kernel cannot attach {kind} programs (no BPF trampolines): {e}") from e
    try:
        fd = _sys.link_create_tracing(prog_fd(program), at, cookie=cookie or 0)
    except BpfError as e:
        if e.errno in UNSUPPORTED_ERRNOS:
            raise NotSupportedError(kind, f"this kernel cannot attach {kind} programs ({e})") from e
        raise
    link = TracingLink(program, fd, target or program.section or kind, cookie=cookie)
    link.kind = kind
    return link

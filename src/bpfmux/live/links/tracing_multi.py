"""tracing_multi links (the 2026 mainline uapi): one ``BPF_PROG_TYPE_TRACING``
program loaded with attach type ``BPF_TRACE_FENTRY_MULTI``,
``BPF_TRACE_FEXIT_MULTI`` or ``BPF_TRACE_FSESSION_MULTI`` attached to many
kernel functions in one ``BPF_LINK_CREATE`` (``link_create.tracing_multi
{ids, cookies, cnt}``: ``cnt`` vmlinux BTF ids of functions, optional u64
cookies), link type ``BPF_LINK_TYPE_TRACING_MULTI``.

Targets are function names or globs; each becomes the BTF id of the
``FUNC`` of that name in vmlinux BTF. Whether the kernel has tracing_multi is
asked of the feature probes (:mod:`bpfmux.live.features`, which create a real
tracing_multi link); a kernel without it raises
:class:`~bpfmux.errors.NotSupportedError`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ...api import MultiLink
from ...errors import BpfError, InvalidArgumentError, NotFoundError, NotSupportedError
from ...host.targets import resolve_kernel_functions
from ...uapi import AttachType, BtfKind, LinkType
from .. import sys as _sys
from ..features import features
from ._base import UNSUPPORTED_ERRNOS, FdLink, prog_fd

if TYPE_CHECKING:
    from ...api import Program
    from ...btf import Btf

__all__ = ["MULTI_ATTACH_TYPES", "TracingMultiLink", "attach_tracing_multi", "btf_function_ids"]

#: tracing_multi attach types and their kind names
MULTI_ATTACH_TYPES = {
    AttachType.TRACE_FENTRY_MULTI: "fentry.multi",
    AttachType.TRACE_FEXIT_MULTI: "fexit.multi",
    AttachType.TRACE_FSESSION_MULTI: "fsession.multi",
}


class TracingMultiLink(FdLink, MultiLink):
    """One ``tracing_multi`` kernel link.

    :ivar functions: function names, in link order.
    :ivar btf_ids: their vmlinux BTF ids.
    :ivar cookies: per-function cookies (``None``: none).
    """

    kind = "tracing_multi"
    mechanism = "tracing_multi"
    updatable = True  # one BPF_LINK_UPDATE swaps the program on every function

    def __init__(self, program: Program, fd: _sys.Fd, functions: list[str], btf_ids: list[int],
                 cookies: list[int] | None, targets: Sequence[str]) -> None:  # fmt: skip
        super().__init__(program, fd, f"{len(functions)} kernel functions")
        self.functions = functions
        self.btf_ids = btf_ids
        self.cookies = cookies
        self.targets = tuple(targets)


def btf_function_ids(names: Sequence[str], btf: Btf | None = None) -> list[int]:
    """vmlinux BTF ids of the ``FUNC`` types called ``names``.

    :raises NotFoundError: a name has no BTF function.
    """
    if btf is None:
        from ...btf import Btf

        btf = Btf.vmlinux()
    out = []
    for n in names:
        ids = btf.find_ids(n, BtfKind.FUNC)
        if not ids:
            raise NotFoundError("BTF function", n, "it is not in vmlinux BTF (inlined, static or misspelt?)")
        out.append(ids[0])
    return out


def attach_tracing_multi(program: Program, targets: Sequence[str] | str, cookies: Sequence[int] | None = None, *,
                         attach_type: AttachType | int | None = None) -> TracingMultiLink:  # fmt: skip
    """Attach to every function at once. All or nothing.

    :raises NotSupportedError: the kernel has no tracing_multi links.
    :raises NotFoundError: unknown function, or a glob matching nothing.
    :raises BpfError: the kernel refused (``EINVAL``: duplicate id, a
        function it cannot trace; ``E2BIG``: too many).
    """
    if isinstance(targets, str):
        targets = [targets]
    targets = list(targets)
    if not targets:
        raise InvalidArgumentError("no functions given")
    at = AttachType(int(attach_type)) if attach_type is not None else program.attach_type
    if at not in MULTI_ATTACH_TYPES:
        raise InvalidArgumentError(f"not a fentry.multi/fexit.multi/fsession.multi program (attach type {at!r})")
    try:
        features().require("link_type", LinkType.TRACING_MULTI)
    except NotSupportedError as e:
        raise NotSupportedError("tracing_multi", f"this kernel cannot attach tracing_multi links: {e}") from e
    names, cks = resolve_kernel_functions(targets, cookies)
    ids = btf_function_ids(names)
    try:
        fd = _sys.link_create_tracing_multi(prog_fd(program), at, ids, cks)
    except BpfError as e:
        if e.errno in UNSUPPORTED_ERRNOS:
            raise NotSupportedError("tracing_multi", f"this kernel cannot attach tracing_multi links ({e})") from e
        raise
    return TracingMultiLink(program, fd, names, ids, cks, targets)

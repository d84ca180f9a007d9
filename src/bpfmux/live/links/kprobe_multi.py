"""kprobe_multi and kprobe session links: one kprobe-type program (loaded
with attach type ``BPF_TRACE_KPROBE_MULTI`` or ``BPF_TRACE_KPROBE_SESSION``)
on many kernel functions in one ``BPF_LINK_CREATE`` (through fprobe), with a
BPF cookie per function.

Targets are function names or globs, matched over the functions ftrace can
hook (``available_filter_functions``) or, where that is unreadable, over the
text symbols of ``/proc/kallsyms``. Kernels without fprobe answer
``EOPNOTSUPP``: :class:`~bpfmux.errors.NotSupportedError`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ...api import MultiLink
from ...errors import BpfError, InvalidArgumentError, NotSupportedError
from ...host.targets import resolve_kernel_functions
from ...uapi import AttachType
from .. import sys as _sys
from ._base import UNSUPPORTED_ERRNOS, FdLink, prog_fd

if TYPE_CHECKING:
    from ...api import Program

__all__ = ["KprobeMultiLink", "attach_kprobe_multi"]


class KprobeMultiLink(FdLink, MultiLink):
    """One ``kprobe_multi`` kernel link.

    :ivar functions: the probed function names, in link order.
    :ivar cookies: the cookie of each function (``None``: none).
    """

    kind = "kprobe_multi"
    mechanism = "kprobe_multi"

    def __init__(self, program: Program, fd: _sys.Fd, functions: list[str], cookies: list[int] | None,
                 targets: Sequence[str], *, session: bool, retprobe: bool) -> None:  # fmt: skip
        super().__init__(program, fd, f"{len(functions)} kernel functions")
        self.functions = functions
        self.cookies = cookies
        self.targets = tuple(targets)
        self.session = session
        self.retprobe = retprobe
        if session:
            self.kind = "kprobe_session"


def attach_kprobe_multi(program: Program, targets: Sequence[str] | str, cookies: Sequence[int] | None = None, *,
                        retprobe: bool = False, session: bool | None = None) -> KprobeMultiLink:  # fmt: skip
    """Attach to every function at once. All or nothing.

    :raises NotSupportedError: the kernel has no kprobe_multi (no fprobe).
    :raises NotFoundError: a glob matching nothing.
    :raises BpfError: the kernel refused (``ESRCH``/``ENOENT``: unknown function).
    """
    if isinstance(targets, str):
        targets = [targets]
    targets = list(targets)
    if not targets:
        raise InvalidArgumentError("no kprobe targets given")
    eat = program.attach_type
    if session is None:
        session = eat == AttachType.TRACE_KPROBE_SESSION
    if session and retprobe:
        raise InvalidArgumentError("a kprobe session runs on entry and return; do not ask for retprobe too")
    kind = "kprobe sessions" if session else "kprobe_multi"
    names, cks = resolve_kernel_functions(targets, cookies)
    try:
        fd = _sys.link_create_kprobe_multi(prog_fd(program), syms=names, cookies=cks, retprobe=retprobe,
                                           session=session)  # fmt: skip
    except BpfError as e:
        if e.errno in UNSUPPORTED_ERRNOS:
            raise NotSupportedError(kind, f"this kernel cannot attach {kind} (no fprobe?): {e}") from e
        raise
    return KprobeMultiLink(program, fd, names, cks, targets, session=session, retprobe=retprobe)

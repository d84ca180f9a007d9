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
from typing import Any

from ...api import MultiLink
from ...errors import BpfError, NotFoundError, NotSupportedError, ParseError
from ...host import tracefs
from ...host.globs import match
from ...host.kallsyms import KernelSymbols
from ...uapi import AttachType
from .. import sys as _sys
from ._base import UNSUPPORTED_ERRNOS, FdLink, expected_attach_type, prog_fd

__all__ = ["KprobeMultiLink", "attach_kprobe_multi", "resolve_kernel_functions"]


class KprobeMultiLink(FdLink, MultiLink):
    """One ``kprobe_multi`` kernel link.

    :ivar functions: the probed function names, in link order.
    :ivar cookies: the cookie of each function (``None``: none).
    """

    kind = "kprobe_multi"
    mechanism = "kprobe_multi"

    def __init__(self, program: Any, fd: _sys.Fd, functions: list[str], cookies: list[int] | None,
                 targets: Sequence[str], *, session: bool, retprobe: bool) -> None:  # fmt: skip
        super().__init__(program, fd, f"{len(functions)} kernel functions")
        self.functions = functions
        self.cookies = cookies
        self.targets = tuple(targets)
        self.session = session
        self.retprobe = retprobe
        if session:
            self.kind = "kprobe_session"


def _candidates() -> list[str]:
    try:
        return tracefs.available_filter_functions()
    except NotSupportedError:
        ks = KernelSymbols.cached()
        return [s.name for s in ks.symbols if s.is_function and s.module is None]


def resolve_kernel_functions(targets: Sequence[str], cookies: Sequence[int] | None = None
                             ) -> tuple[list[str], list[int] | None]:  # fmt: skip
    """Expand globs into function names (deduplicated, first wins); a glob's
    cookie applies to each function it matches.

    :raises ParseError: bad cookie count.
    :raises NotFoundError: a glob matching nothing.
    """
    if cookies is not None and len(cookies) != len(targets):
        raise ParseError(f"{len(cookies)} cookies for {len(targets)} targets; give one cookie per target")
    names: list[str] = []
    cks: list[int] | None = [] if cookies is not None else None
    seen: set[str] = set()
    cands: list[str] | None = None
    for i, t in enumerate(targets):
        if any(c in t for c in "*?["):
            if cands is None:
                cands = _candidates()
            found = match(t, cands)
            if not found:
                raise NotFoundError("kernel function", t, "the glob matches no traceable function")
        else:
            found = [t]
        for n in found:
            if n in seen:
                continue
            seen.add(n)
            names.append(n)
            if cks is not None:
                cks.append(cookies[i])  # type: ignore[index]
    return names, cks


def attach_kprobe_multi(program: Any, targets: Sequence[str] | str, cookies: Sequence[int] | None = None, *,
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
        raise ParseError("no kprobe targets given")
    eat = expected_attach_type(program)
    if session is None:
        session = eat == AttachType.TRACE_KPROBE_SESSION
    if session and retprobe:
        raise ParseError("a kprobe session runs on entry and return; do not ask for retprobe too")
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

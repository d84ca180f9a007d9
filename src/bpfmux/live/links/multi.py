"""MultiLink: one program on many targets, with the fastest mechanism the
kernel offers for that program:

| program | mechanism |
| --- | --- |
| kprobe-type, loaded as ``uprobe.multi``/``uprobe.session`` | ``uprobe_multi`` (one link per binary) |
| kprobe-type, loaded as ``kprobe.multi``/``kprobe.session`` | ``kprobe_multi`` |
| tracing, loaded as ``fentry.multi``/``fexit.multi``/``fsession.multi`` | ``tracing_multi`` |
| raw tracepoint | ``raw_tracepoint`` (one raw tracepoint link each; sub-millisecond) |
| tracepoint | ``perf_event`` (one perf event + link each) |
| plain kprobe-type (uprobes ``BIN:SYM``, kprobes ``FUNC``) | ``perf_event`` |

Every attach is all or nothing: on any failure (or Ctrl-C) whatever was
attached is detached before the error propagates. Detaching closes
perf-event links on several threads: the bpf_link closes then overlap their
RCU grace periods (the perf events' own tracepoint unregistration is
serialized by the kernel).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ...api import Link, MultiLink
from ...errors import NotSupportedError, ParseError
from ...host import tracefs
from ...uapi import AttachType, ProgType
from ._base import close_all, deferred_signals, expected_attach_type, prog_fd, prog_type, section_info

__all__ = ["GroupLink", "attach_many", "expand_tracepoints"]


class GroupLink(MultiLink):
    """Several links held and closed as one.

    :ivar links: the member links, in attach order.
    :ivar mechanism: how they were made (see module doc).
    :ivar targets: the targets as given.
    """

    def __init__(self, program: Any, links: list[Link], targets: Sequence[str], *, mechanism: str, kind: str,
                 parallel_close: bool = False) -> None:  # fmt: skip
        self._program = program
        self.links = links
        self.targets = tuple(targets)
        self.mechanism = mechanism
        self.kind = kind
        self.parallel_close = parallel_close
        self._closed = False

    @property
    def program(self) -> Any:
        """The attached program."""
        return self._program

    @property
    def closed(self) -> bool:
        """True once closed."""
        return self._closed

    def close(self) -> None:
        """Detach everything (in parallel for perf-event links); idempotent.
        Every member is closed even if one fails or Ctrl-C arrives."""
        if self._closed:
            return
        self._closed = True
        close_all(self.links, parallel=self.parallel_close)

    def update(self, program: Any, old: Any = None) -> None:
        """Swap the program on every member link (each swap is atomic, the
        group's is not).

        :raises NotSupportedError: a member link kind cannot be updated.
        """
        for link in self.links:
            link.update(program, old)
        self._program = program

    def __len__(self) -> int:
        return len(self.links)

    def __iter__(self):
        return iter(self.links)

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<GroupLink {self.mechanism} {len(self.links)} links {state}>"


def expand_tracepoints(targets: Iterable[str]) -> list[str]:
    """``"syscalls:sys_enter_*"`` → every matching ``category:name``; plain
    names pass through.

    :raises NotFoundError: a glob matching nothing.
    """
    from ...errors import NotFoundError

    out = []
    for t in targets:
        if any(c in t for c in "*?["):
            found = [f"{c}:{n}" for c, n in tracefs.list_tracepoints(t)]
            if not found:
                raise NotFoundError("tracepoint", t, "the glob matches no tracepoint")
            out.extend(found)
        else:
            out.append(t)
    return out


def _expand_raw(targets: Iterable[str]) -> list[str]:
    out = []
    for t in targets:
        if any(c in t for c in "*?["):
            pat = t if (":" in t or "/" in t) else f"*:{t}"
            out.extend(n for _, n in tracefs.list_tracepoints(pat))
        else:
            out.append(t)
    return out


def _per_target(program: Any, targets: list[str], cookies: Sequence[int] | None, attach_one: Any,
                mechanism: str, kind: str, parallel_close: bool) -> GroupLink:  # fmt: skip
    links: list[Link] = []
    try:
        for i, t in enumerate(targets):
            with deferred_signals():
                links.append(attach_one(t, cookies[i] if cookies is not None else None))
    except BaseException:
        close_all(links, parallel=parallel_close)
        raise
    return GroupLink(program, links, targets, mechanism=mechanism, kind=kind, parallel_close=parallel_close)


def attach_many(program: Any, targets: Iterable[str] | str, cookies: Sequence[int] | None = None,
                **opts: Any) -> MultiLink:  # fmt: skip
    """Attach ``program`` to every target with the best mechanism (module doc).

    :param targets: target strings of the program's kind (globs allowed).
    :param cookies: one BPF cookie per target (a glob's cookie goes to every
        function it matches).
    :param opts: ``retprobe``, ``session``, ``pid`` (uprobes), ``via``
        (``"link"``/``"ioctl"`` for perf events), ``parallel_close``.
    :raises NotSupportedError: no mechanism fits this program, or the kernel
        lacks the one it needs.
    :raises NotFoundError: a target does not exist.
    :raises BpfError: the kernel refused.
    """
    targets = [targets] if isinstance(targets, str) else list(targets)
    if not targets:
        raise ParseError("attach_many needs at least one target")
    ptype = prog_type(program)
    eat = expected_attach_type(program)
    info = section_info(program)
    retprobe = bool(opts.pop("retprobe", info.retprobe if info is not None else False))
    parallel = opts.pop("parallel_close", True)

    if ptype == ProgType.KPROBE and eat in (AttachType.TRACE_UPROBE_MULTI, AttachType.TRACE_UPROBE_SESSION):
        from .uprobe_multi import attach_uprobe_multi

        return attach_uprobe_multi(program, targets, cookies, retprobe=retprobe, **opts)
    if ptype == ProgType.KPROBE and eat in (AttachType.TRACE_KPROBE_MULTI, AttachType.TRACE_KPROBE_SESSION):
        from .kprobe_multi import attach_kprobe_multi

        return attach_kprobe_multi(program, targets, cookies, retprobe=retprobe, **opts)
    if ptype == ProgType.TRACING:
        from .tracing_multi import MULTI_ATTACH_TYPES, attach_tracing_multi

        if eat in MULTI_ATTACH_TYPES:
            return attach_tracing_multi(program, targets, cookies, **opts)
        raise NotSupportedError(
            "multi attach", "an fentry/fexit/fmod_ret/tp_btf program is bound to one target when it is loaded; "
            "load it as fentry.multi/fexit.multi (tracing_multi) or load one program per target",
        )
    if cookies is not None and len(cookies) != len(targets):
        raise ParseError(f"{len(cookies)} cookies for {len(targets)} targets; give one cookie per target")
    if ptype in (ProgType.RAW_TRACEPOINT, ProgType.RAW_TRACEPOINT_WRITABLE):
        from .raw_tracepoint import attach_raw_tracepoint

        names = _expand_raw(targets) if cookies is None else targets
        return _per_target(program, names, cookies, lambda t, c: attach_raw_tracepoint(program, t, cookie=c),
                           "raw_tracepoint", "raw_tracepoint", False)  # fmt: skip
    if ptype == ProgType.TRACEPOINT:
        from .tracepoint import attach_tracepoint

        via = opts.pop("via", None)
        names = expand_tracepoints(targets) if cookies is None else targets
        return _per_target(program, names, cookies,
                           lambda t, c: attach_tracepoint(program, t, cookie=c, via=via),
                           "perf_event", "tracepoint", parallel)  # fmt: skip
    if ptype == ProgType.KPROBE:
        from .kprobe import attach_kprobe
        from .uprobe import attach_uprobe

        via = opts.pop("via", None)
        pid = opts.pop("pid", -1)

        def one(t: str, c: int | None) -> Link:
            if ":" in t:
                return attach_uprobe(program, t, retprobe=retprobe, pid=pid, cookie=c, via=via)
            return attach_kprobe(program, t, retprobe=retprobe, cookie=c, via=via)

        if any(any(ch in t for ch in "*?[") for t in targets):
            raise NotSupportedError(
                "multi attach", "globs need a program loaded as uprobe.multi or kprobe.multi; "
                "a plain kprobe/uprobe program takes exact targets",
            )
        kind = "uprobe" if all(":" in t for t in targets) else "kprobe"
        return _per_target(program, targets, cookies, one, "perf_event", kind, parallel)
    prog_fd(program)
    name = ptype.name.lower() if ptype is not None else "unknown"
    raise NotSupportedError("multi attach", f"a {name} program cannot be attached to many targets")

"""One attach dispatch for both kernels.

A program's :attr:`~bpfmux.api.Program.attach_kind` (an
:class:`~bpfmux.obj.sections.AttachKind`, derived from its section, else its
type and attach type) decides how it attaches; :func:`attach` and
:func:`attach_many` turn that into one call on the kernel's
:class:`Linker`, which makes the links. The live kernel's linker
(:mod:`bpfmux.live.links`) makes ``bpf_link``\\ s and perf events; the
emulated kernel's (:mod:`bpfmux.emu.kernel.linker`) makes emulated ones.
Nothing here touches a kernel.

| attach kind | :func:`attach` (one target) | :func:`attach_many` (many targets) |
| --- | --- | --- |
| tracepoint | ``tracepoint`` | one ``tracepoint`` link each (globs expanded) |
| raw_tracepoint | ``raw_tracepoint`` | one ``raw_tracepoint`` link each (globs expanded) |
| tp_btf, trampoline | ``tp_btf`` / ``trampoline`` | not possible: bound to one target at load |
| trace_multi, multi_func | ``tracing_multi`` with one glob | ``tracing_multi`` |
| kprobe | ``kprobe`` (``BIN:SYM`` → ``uprobe``) | ``kprobe`` / ``uprobe`` each (exact names) |
| ksyscall | ``kprobe`` on the syscall's function | as kprobe |
| kprobe_multi, kprobe_session | ``kprobe_multi`` with one glob | ``kprobe_multi`` |
| uprobe | ``uprobe`` | ``uprobe`` each |
| uprobe_multi | ``uprobe_multi`` with one glob | ``uprobe_multi`` |
| perf_event | ``perf_event`` (an event name, default ``cpu_clock``) | not possible |
| any perf-event kind, ``event=`` given | ``perf_event_link`` on that event | not possible |
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from .errors import InvalidArgumentError, NotSupportedError
from .obj.sections import AttachKind, SecFlags, match_section

if TYPE_CHECKING:  # pragma: no cover
    from .api import Link, MultiLink, Program

__all__ = ["Linker", "attach", "attach_many", "is_glob"]

K = AttachKind


class Linker(Protocol):
    """What a kernel implements to make links; :func:`attach` and
    :func:`attach_many` call it. Every method is all or nothing.

    Methods raise :class:`~bpfmux.errors.NotSupportedError` for a kind the
    kernel lacks, :class:`~bpfmux.errors.NotFoundError` for a target that
    does not exist and :class:`~bpfmux.errors.BpfError` for the kernel's
    refusals (``E2BIG``, ``EEXIST``, ``EINVAL``, …).

    The parameters here are the ones every kernel takes. A kernel's linker
    may take more keyword options (the live one: ``via=``, ``pid=``,
    sampling options); :func:`attach` and :func:`attach_many` pass the
    caller's options through to its method.
    """

    def tracepoint(self, program: Program, target: str, *, cookie: int | None) -> Link: ...

    def raw_tracepoint(self, program: Program, target: str, *, cookie: int | None) -> Link: ...

    def tp_btf(self, program: Program, target: str | None, *, cookie: int | None) -> Link: ...

    def trampoline(self, program: Program, target: str | None, *, cookie: int | None) -> Link: ...

    def tracing_multi(self, program: Program, targets: list[str], cookies: Sequence[int] | None) -> MultiLink: ...

    def kprobe(self, program: Program, target: str, *, retprobe: bool, cookie: int | None) -> Link: ...

    def kprobe_multi(self, program: Program, targets: list[str], cookies: Sequence[int] | None, *, retprobe: bool,
                     session: bool) -> MultiLink: ...

    def uprobe(self, program: Program, target: str, *, retprobe: bool, cookie: int | None) -> Link: ...

    def uprobe_multi(self, program: Program, targets: list[str], cookies: Sequence[int] | None, *, retprobe: bool,
                     session: bool) -> MultiLink: ...

    def perf_event(self, program: Program, target: str, *, cookie: int | None = None) -> Link: ...

    def perf_event_link(self, program: Program, event: Any, *, cookie: int | None) -> Link:
        """The program on ``event``, an open perf event of this kernel (each
        kernel has its own perf event type), as a ``BPF_PERF_EVENT`` link."""
        ...

    def syscall_function(self, name: str) -> str:
        """The kernel function behind syscall ``name`` (``ksyscall/NAME``)."""
        ...

    def expand_tracepoints(self, patterns: Sequence[str], *, raw: bool) -> list[str]:
        """Globs → ``category:name`` (``raw``: bare raw tracepoint names); plain names pass through.

        :raises NotFoundError: a glob matches nothing.
        """
        ...

    def group(self, program: Program, links: list[Link], targets: Sequence[str], *, mechanism: str,
              kind: str) -> MultiLink:
        """Several links held and closed as one :class:`~bpfmux.api.MultiLink`."""
        ...

    def close_all(self, links: Iterable[Link]) -> None:
        """Close every link, all of them even if one fails; raise the first error."""
        ...


def is_glob(text: str) -> bool:
    """True when ``text`` holds a shell-glob character (``*``, ``?``, ``[``)."""
    return any(c in text for c in "*?[")


def _section_flags(program: Program) -> SecFlags:
    if not program.section:
        return SecFlags.NONE
    return match_section(program.section).flags


def _retprobe(program: Program, opts: dict[str, Any]) -> bool:
    return bool(opts.pop("retprobe", SecFlags.RETPROBE in _section_flags(program)))


def _session(program: Program, opts: dict[str, Any]) -> bool:
    from .uapi import AttachType

    default = SecFlags.SESSION in _section_flags(program) or program.attach_type in (
        AttachType.TRACE_KPROBE_SESSION, AttachType.TRACE_UPROBE_SESSION)
    return bool(opts.pop("session", default))


#: the options each attach kind takes besides ``cookie``/``cookies``, ``retprobe``, ``session`` and ``event``
_OPTIONS: dict[AttachKind, frozenset[str]] = {
    K.TRACEPOINT: frozenset({"via"}),
    K.RAW_TRACEPOINT: frozenset(),
    K.TP_BTF: frozenset(),
    K.TRAMPOLINE: frozenset({"attach_type"}),
    K.TRACE_MULTI: frozenset({"attach_type"}),
    K.MULTI_FUNC: frozenset({"attach_type"}),
    K.KPROBE: frozenset({"via", "pid"}),
    K.KSYSCALL: frozenset({"via", "pid"}),
    K.UPROBE: frozenset({"via", "pid"}),
    K.KPROBE_MULTI: frozenset(),
    K.KPROBE_SESSION: frozenset(),
    K.UPROBE_MULTI: frozenset({"pid"}),
    K.PERF_EVENT: frozenset({"via", "pid", "sample_freq", "sample_period", "hardware", "cpus"}),
}
_COMMON = frozenset({"retprobe", "session"})


def _check_options(program: Program, kind: AttachKind, opts: dict[str, Any]) -> None:
    allowed = _OPTIONS.get(kind, frozenset()) | _COMMON
    unknown = sorted(set(opts) - allowed)
    if unknown:
        takes = ", ".join(sorted(allowed | {"cookie"})) or "no options"
        raise InvalidArgumentError(f"program {program.name!r} ({kind.value}): unknown attach option "
                                   f"{', '.join(unknown)}; it takes {takes}")


def _no_pid(program: Program, opts: dict[str, Any]) -> None:
    if "pid" in opts:
        raise InvalidArgumentError(f"program {program.name!r}: a kprobe fires for every process; pid= filters "
                                   "uprobes only")


def _kind(program: Program) -> AttachKind:
    kind = program.attach_kind
    if kind is None:
        raise NotSupportedError("attach", f"program {program.name!r} ({program.prog_type.name.lower()}) does not "
                                "attach to a tracing hook; bpfmux attaches tracing programs and perf_event programs")
    return kind


def _need(program: Program, target: str | None) -> str:
    if not target:
        raise InvalidArgumentError(f"no attach target for program {program.name!r}: give one, or load it from a "
                                   "section that names it")
    return target


def _one_cookie(cookie: int | None) -> list[int] | None:
    return [cookie] if cookie is not None else None


def attach(linker: Linker, program: Program, target: str | None = None, **opts: Any) -> Link:
    """Attach ``program`` to ``target`` (default: its ``attach_target``) the
    way its attach kind says (module table).

    ``event=`` (an open perf event of the same kernel) puts a tracepoint,
    kprobe, uprobe or perf_event program on that event instead.

    :raises InvalidArgumentError: no target given and the section names none,
        or an option the program's kind does not take.
    :raises NotSupportedError: the program does not attach to a tracing hook,
        or the kernel lacks its kind.
    :raises NotFoundError: the target does not exist.
    :raises BpfError: the kernel refused.
    """
    kind = _kind(program)
    if target is None:
        target = program.attach_target
    cookie = opts.pop("cookie", None)
    event = opts.pop("event", None)
    _check_options(program, kind, opts)
    if event is not None:
        if kind not in (K.TRACEPOINT, K.KPROBE, K.KSYSCALL, K.UPROBE, K.PERF_EVENT):
            raise InvalidArgumentError(f"event= takes a perf event; program {program.name!r} is not a tracepoint, "
                                       "kprobe, uprobe or perf_event program")
        return linker.perf_event_link(program, event, cookie=cookie, **opts)
    if kind is K.TRACEPOINT:
        return linker.tracepoint(program, _need(program, target), cookie=cookie, **opts)
    if kind is K.RAW_TRACEPOINT:
        return linker.raw_tracepoint(program, _need(program, target), cookie=cookie, **opts)
    if kind is K.TP_BTF:
        return linker.tp_btf(program, target, cookie=cookie, **opts)
    if kind is K.TRAMPOLINE:
        return linker.trampoline(program, target, cookie=cookie, **opts)
    if kind in (K.TRACE_MULTI, K.MULTI_FUNC):
        return linker.tracing_multi(program, [_need(program, target)], _one_cookie(cookie), **opts)
    if kind in (K.KPROBE_MULTI, K.KPROBE_SESSION):
        return linker.kprobe_multi(program, [_need(program, target)], _one_cookie(cookie),
                                   retprobe=_retprobe(program, opts), session=_session(program, opts), **opts)
    if kind is K.UPROBE_MULTI:
        return linker.uprobe_multi(program, [_need(program, target)], _one_cookie(cookie),
                                   retprobe=_retprobe(program, opts), session=_session(program, opts), **opts)
    if kind is K.PERF_EVENT:
        return linker.perf_event(program, target or "cpu_clock", cookie=cookie, **opts)
    if kind in (K.KPROBE, K.KSYSCALL, K.UPROBE):
        t = _need(program, target)
        retprobe = _retprobe(program, opts)
        if kind is K.KSYSCALL and t == program.attach_target:
            t = linker.syscall_function(t)
        if kind is K.UPROBE or ":" in t:
            return linker.uprobe(program, t, retprobe=retprobe, cookie=cookie, **opts)
        _no_pid(program, opts)
        return linker.kprobe(program, t, retprobe=retprobe, cookie=cookie, **opts)
    if kind is K.USDT:
        raise NotSupportedError("usdt", "USDT probes are not implemented by bpfmux; attach the program as a uprobe "
                                "on the probe's address instead")
    raise NotSupportedError(f"attaching {kind.value} programs", f"program {program.name!r}: bpfmux cannot attach "
                            f"{kind.value} programs")


def attach_many(linker: Linker, program: Program, targets: Iterable[str] | str, cookies: Sequence[int] | None = None,
                **opts: Any) -> MultiLink:
    """Attach ``program`` to every target at once with the best mechanism
    its kind has (module table). All or nothing.

    :param cookies: one BPF cookie per target (a glob's cookie goes to every
        function it matches).
    :raises InvalidArgumentError: no targets, cookies that do not match them,
        or an option the program's kind does not take.
    :raises NotSupportedError: the program cannot be attached to many
        targets, or the kernel lacks the mechanism.
    :raises NotFoundError: a target does not exist or a glob matches nothing.
    :raises BpfError: the kernel refused.
    """
    names = [targets] if isinstance(targets, str) else list(targets)
    if not names:
        raise InvalidArgumentError(f"attach_many of {program.name!r} needs at least one target")
    if cookies is not None and len(cookies) != len(names):
        raise InvalidArgumentError(f"{len(cookies)} cookies for {len(names)} targets; give one cookie per target")
    kind = _kind(program)
    _check_options(program, kind, opts)
    if kind in (K.TRACE_MULTI, K.MULTI_FUNC):
        return linker.tracing_multi(program, names, cookies, **opts)
    if kind in (K.KPROBE_MULTI, K.KPROBE_SESSION):
        return linker.kprobe_multi(program, names, cookies, retprobe=_retprobe(program, opts),
                                   session=_session(program, opts), **opts)
    if kind is K.UPROBE_MULTI:
        return linker.uprobe_multi(program, names, cookies, retprobe=_retprobe(program, opts),
                                   session=_session(program, opts), **opts)
    if kind in (K.TP_BTF, K.TRAMPOLINE):
        raise NotSupportedError("multi attach", "an fentry/fexit/fmod_ret/tp_btf program is bound to one target "
                                "when it is loaded; load it as fentry.multi/fexit.multi (tracing multi) or load "
                                "one program per target")
    if kind in (K.TRACEPOINT, K.RAW_TRACEPOINT):
        raw = kind is K.RAW_TRACEPOINT
        expanded = linker.expand_tracepoints(names, raw=raw) if cookies is None else names
        one: Callable[[str, int | None], Link]
        if raw:
            def one(t: str, c: int | None) -> Link:
                return linker.raw_tracepoint(program, t, cookie=c, **opts)
        else:
            def one(t: str, c: int | None) -> Link:
                return linker.tracepoint(program, t, cookie=c, **opts)
        mechanism = "raw_tracepoint" if raw else "perf_event"
        return _per_target(linker, program, expanded, cookies, one, mechanism, kind.value)
    if kind in (K.KPROBE, K.KSYSCALL, K.UPROBE):
        if any(is_glob(t) for t in names):
            raise NotSupportedError("multi attach", "globs need a program loaded as uprobe.multi or kprobe.multi; "
                                    "a plain kprobe/uprobe program takes exact targets")
        retprobe = _retprobe(program, opts)

        def probe(t: str, c: int | None) -> Link:
            if kind is K.UPROBE or ":" in t:
                return linker.uprobe(program, t, retprobe=retprobe, cookie=c, **opts)
            if kind is K.KSYSCALL:
                t = linker.syscall_function(t)
            _no_pid(program, opts)
            return linker.kprobe(program, t, retprobe=retprobe, cookie=c, **opts)

        sub = "uprobe" if kind is K.UPROBE or all(":" in t for t in names) else "kprobe"
        return _per_target(linker, program, names, cookies, probe, "perf_event", sub)
    raise NotSupportedError("multi attach", f"a {kind.value} program cannot be attached to many targets")


def _per_target(linker: Linker, program: Program, targets: list[str], cookies: Sequence[int] | None,
                one: Callable[[str, int | None], Link], mechanism: str, kind: str) -> MultiLink:
    links: list[Link] = []
    try:
        for i, t in enumerate(targets):
            links.append(one(t, cookies[i] if cookies is not None else None))
    except BaseException:
        linker.close_all(links)
        raise
    return linker.group(program, links, targets, mechanism=mechanism, kind=kind)

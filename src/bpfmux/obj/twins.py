"""Twin programs: two or more programs of one object on the same hook.

Objects written for many kernels ship one program per way of reaching a
hook — ``tp_btf/sched_switch`` and ``raw_tp/sched_switch``,
``fentry/vfs_read`` and ``kprobe/vfs_read`` — and their user space loads
only the one its kernel supports best (after a feature probe). Attaching
every twin would run the same code twice per event: a histogram counts
everything twice.

:func:`twin_groups` finds them: programs whose sections name the same hook
(:func:`hook_of`), best-supported first (:data:`PREFERENCE`): tp_btf, then
raw_tp, then a tracepoint of that name; fentry before kprobe, fexit before
kretprobe. A loader attaches the first of a group that loads and attaches.
"""

from __future__ import annotations

from collections.abc import Iterable

from .sections import AttachKind, SecFlags
from .spec import ProgramSpec

__all__ = ["PREFERENCE", "hook_of", "twin_groups"]

#: how well a kind of program reaches its hook (lower: better), per hook family
PREFERENCE: dict[AttachKind, int] = {
    AttachKind.TP_BTF: 0,
    AttachKind.RAW_TRACEPOINT: 1,
    AttachKind.TRACEPOINT: 2,
    AttachKind.TRAMPOLINE: 0,
    AttachKind.KPROBE: 1,
}


def hook_of(ps: ProgramSpec) -> tuple[str, str] | None:
    """``(family, name)`` of the hook ``ps`` runs on, for the program kinds
    that have twins; ``None`` for any other program.

    Families: ``"tracepoint"`` (tp_btf, raw_tp and tracepoint programs of the
    same event name), ``"entry"``/``"exit"`` (fentry/kprobe and
    fexit/kretprobe of the same function).
    """
    info = ps.section_info
    kind = info.kind.attach if info.kind is not None else None
    target = ps.attach_target
    if kind is None or not target:
        return None
    if kind in (AttachKind.TP_BTF, AttachKind.RAW_TRACEPOINT):
        return "tracepoint", target
    if kind is AttachKind.TRACEPOINT:
        return "tracepoint", target.replace(":", "/").rsplit("/", 1)[-1]
    ret = bool(info.kind is not None and SecFlags.RETPROBE in info.kind.flags)
    if kind is AttachKind.KPROBE:
        return ("exit" if ret else "entry"), target.split("+", 1)[0]
    if kind is AttachKind.TRAMPOLINE:
        at = ps.expected_attach_type
        name = at.name if at is not None else ""
        if name == "TRACE_FENTRY":
            return "entry", target
        if name == "TRACE_FEXIT":
            return "exit", target
    return None


def _rank(ps: ProgramSpec) -> int:
    kind = ps.section_info.kind.attach if ps.section_info.kind is not None else None
    return PREFERENCE.get(kind, 9) if kind is not None else 9


def twin_groups(programs: Iterable[ProgramSpec]) -> list[list[ProgramSpec]]:
    """Groups of two or more programs on one hook, each best-supported
    first (ties in object order), groups in object order of their first
    program. Programs of the same kind on one hook are not twins (an object
    may mean to run both)."""
    by_hook: dict[tuple[str, str], list[ProgramSpec]] = {}
    for ps in programs:
        hook = hook_of(ps)
        if hook is not None:
            by_hook.setdefault(hook, []).append(ps)
    groups = []
    for members in by_hook.values():
        kinds = {ps.section_info.kind.attach if ps.section_info.kind is not None else None for ps in members}
        if len(members) < 2 or len(kinds) < 2:
            continue
        groups.append(sorted(members, key=_rank))
    return groups

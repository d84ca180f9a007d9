"""``bpfmux run``: what a tool's user space sets before load, and attaching
program by program.

:func:`configure` applies the options to the object before load —
globals (``--set``), map sizes (``--map-size``, ``--map-value-size``, and a
default for maps the object leaves at 0), programs left out (``--skip``) and
the attach targets of fentry/fexit programs (``--attach``), which are fixed
at load; a stack-trace map declared with value size 0 gets 127 frames. :func:`attach_all` attaches every loaded program its own way
(section, ``--attach``, ``--binary``, ``--freq``), one twin per hook
(:mod:`bpfmux.obj.twins`), and reports each failure instead of stopping.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NoReturn

from ..errors import BpfmuxError, NotFoundError
from ..obj.sections import AttachKind, SecFlags
from ..obj.spec import ObjectSpec
from ..uapi import MapType
from ._common import CliError, UsageError

__all__ = ["AttachReport", "attach_all", "configure", "parse_pairs"]

#: ``max_entries`` given to maps the object declares with 0 (their tool's user space sizes them)
DEFAULT_SIZES: dict[MapType, int] = {MapType.STACK_TRACE: 1024}
DEFAULT_SIZE = 10240
#: value size of a stack-trace map the object leaves at 0: 127 frames (the kernel's default perf_event_max_stack)
STACK_VALUE_SIZE = 127 * 8


def parse_pairs(items: list[str], option: str, *, number: bool = False) -> list[tuple[str, str]]:
    """``NAME=VALUE`` items of a repeatable option.

    :raises UsageError: an item without ``=`` or a name, or (``number``) a value that is not a positive integer.
    """
    out = []
    for item in items:
        name, eq, value = item.partition("=")
        if not eq or not name:
            raise UsageError(f"{option} takes NAME=VALUE, not {item!r}")
        if number:
            try:
                if int(value, 0) < 1:
                    raise ValueError
            except ValueError:
                raise UsageError(f"{option} {name}: {value!r} is not a positive integer") from None
        out.append((name, value))
    return out


def configure(spec: ObjectSpec, args: argparse.Namespace, say: Callable[[str], None]) -> None:
    """Apply ``--set``, ``--map-size``, ``--map-value-size``, ``--skip`` and
    the load-time ``--attach`` targets to ``spec`` (module doc).

    :raises CliError: a name the object does not have, or a value that does not fit.
    """
    from ..errors import ParseError

    for name, value in parse_pairs(args.set, "--set"):
        try:
            spec.set_global(name, value)
        except NotFoundError:
            have = ", ".join(_globals(spec)) or "none"
            raise CliError(f"--set {name}: no read-only global (const volatile) or .data/.bss variable called "
                           f"{name!r}; the object's globals are: {have}") from None
        except ParseError as err:
            raise CliError(f"--set {name}={value}: {err}") from None
    for option, attr, field_ in (("--map-size", "map_size", "max_entries"),
                                 ("--map-value-size", "map_value_size", "value_size")):
        for name, value in parse_pairs(getattr(args, attr), option, number=True):
            if name not in spec.maps:
                raise CliError(f"{option} {name}: the object has no map {name!r}; its maps are: "
                               f"{', '.join(m for m in spec.maps if not spec.maps[m].is_global_data)}")
            spec.resize_map(name, **{field_: int(value, 0)})
    for ms in spec.maps.values():
        if int(ms.type) == MapType.STACK_TRACE and ms.value_size == 0:
            ms.value_size = STACK_VALUE_SIZE
            say(f"map {ms.name}: the object leaves its value size to its user space (0); using {STACK_VALUE_SIZE} "
                f"bytes, {STACK_VALUE_SIZE // 8} frames (--map-value-size {ms.name}=BYTES to choose)")
        if ms.max_entries == 0 and not ms.is_global_data and \
                int(ms.type) not in (MapType.PERF_EVENT_ARRAY, MapType.RINGBUF, MapType.USER_RINGBUF):
            size = DEFAULT_SIZES.get(MapType(int(ms.type)), DEFAULT_SIZE)
            ms.max_entries = size
            say(f"map {ms.name}: the object leaves its size to its user space (max_entries 0); using {size} "
                f"(--map-size {ms.name}=N to choose)")
    for name in args.skip:
        if name not in spec.programs:
            _unknown_program(spec, name, "--skip")
        spec.programs[name].autoload = False
    for name, target in _targets(args).items():
        if name not in spec.programs:
            _unknown_program(spec, name, "--attach")
        ps = spec.programs[name]
        kind = ps.section_info.kind.attach if ps.section_info.kind is not None else None
        if kind in (AttachKind.TRAMPOLINE, AttachKind.TP_BTF):  # the target is part of the load
            if len(target) != 1:
                raise UsageError(f"--attach {name}: a {kind.value} program attaches to one target, not {len(target)}")
            ps.attach_target = target[0]


def _unknown_program(spec: ObjectSpec, name: str, option: str) -> NoReturn:
    raise CliError(f"{option} {name}: the object has no program {name!r}; its programs are: "
                   f"{', '.join(spec.programs)}")


def _globals(spec: ObjectSpec) -> list[str]:
    from ..obj.variables import global_variables

    return [v.name for v in global_variables(spec) if "." not in v.name]


def _targets(args: argparse.Namespace) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for name, target in parse_pairs(args.attach, "--attach"):
        out.setdefault(name, []).append(target)
    return out


@dataclass
class AttachReport:
    """What :func:`attach_all` did.

    :ivar links: the links made.
    :ivar failed: program → why it did not attach.
    :ivar idle: program → why it was loaded but not attached (not a failure).
    """

    links: list[Any] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    idle: dict[str, str] = field(default_factory=dict)


def attach_all(coll: Any, args: argparse.Namespace, say: Callable[[str], None]) -> AttachReport:
    """Attach every loaded program (module doc); a program that fails is
    reported with ``say`` and recorded, the others go on.

    Twins (:func:`bpfmux.obj.twins.twin_groups`) are tried best first and
    only one of each group stays attached, unless ``--all-twins`` or
    ``--program`` chose the programs.
    """
    from ..obj.twins import twin_groups

    report = AttachReport()
    targets = _targets(args)
    loaded = coll.programs
    groups: list[list[str]] = []
    if not args.all_twins and not args.program:
        groups = [[ps.name for ps in g] for g in twin_groups(coll.spec.programs.values())]
    in_group = {n for g in groups for n in g}
    for g in groups:
        chosen = None
        for name in g:
            if name not in loaded:
                continue
            if _attach_one(loaded[name], targets.get(name), args, report, say):
                chosen = name
                break
        others = [n for n in g if n != chosen]
        if chosen is not None:
            say(f"{chosen}: attached; its twin{'s' * (len(others) > 1)} {', '.join(others)} on the same hook "
                f"{'are' if len(others) > 1 else 'is'} not (only the best-supported one runs)")
            for n in others:
                report.failed.pop(n, None)
                report.idle[n] = f"twin of {chosen}"
    for name, prog in loaded.items():
        if name not in in_group:
            _attach_one(prog, targets.get(name), args, report, say)
    return report


def _attach_one(prog: Any, targets: list[str] | None, args: argparse.Namespace, report: AttachReport,
                say: Callable[[str], None]) -> bool:
    """Attach one program to its targets; True when it attached."""
    name = prog.name
    info = prog.spec.section_info if prog.spec is not None else None
    kind = info.kind.attach if info is not None and info.kind is not None else None
    opts: dict[str, Any] = {}
    if kind in (AttachKind.UPROBE, AttachKind.UPROBE_MULTI, AttachKind.USDT) and args.pid is not None:
        opts["pid"] = args.pid
    if kind is AttachKind.PERF_EVENT:
        if args.period is not None:
            opts["sample_period"] = args.period
        else:
            opts["sample_freq"] = args.freq
    plan: list[str | None]
    if targets and kind not in (AttachKind.TRAMPOLINE, AttachKind.TP_BTF):
        plan = list(targets)
    elif kind is None or info is None:
        report.idle[name] = "its section names no attach point"
        say(f"{name} ({prog.section}): loaded, not attached (its section names no attach point)")
        return False
    elif kind in (AttachKind.UPROBE, AttachKind.USDT, AttachKind.UPROBE_MULTI) and not info.auto_attach:
        func = prog.attach_target
        if func and ":" not in func and args.binary:
            plan = [f"{args.binary}:{func}"]
        else:
            why = ("its section names the function but not the binary; give --binary PATH" if func and ":" not in func
                   else f"its section names no binary and function; give --attach {name}=BINARY:FUNCTION")
            report.idle[name] = why
            say(f"{name} ({prog.section}): loaded, not attached ({why})")
            return False
    elif kind is AttachKind.PERF_EVENT:
        plan = [None]
    elif not info.auto_attach and not prog.attach_target:
        report.idle[name] = "its section names no attach point"
        say(f"{name} ({prog.section}): loaded, not attached (its section names no attach point; "
            f"give --attach {name}=TARGET)")
        return False
    else:
        plan = [None]
    made = []
    try:
        for target in plan:
            made.append(_attach(prog, kind, target, opts))
    except (BpfmuxError, OSError) as err:
        for link in made:
            link.close()
        why = _first_line(err)
        report.failed[name] = why
        say(f"{name} ({prog.section}): not attached: {why}")
        return False
    report.links.extend(made)
    if args.verbose:
        for link in made:
            say(f"{name} ({prog.section}) attached: {link!r}")
    return True


def _attach(prog: Any, kind: AttachKind | None, target: str | None, opts: dict[str, Any]) -> Any:
    if kind is AttachKind.PERF_EVENT and target is not None:
        from ..uapi import PerfHwId, PerfSwId

        event = target.removeprefix("hw:").removeprefix("sw:")
        hardware = target.startswith("hw:") or (event.upper() not in PerfSwId.__members__
                                                and event.upper() in PerfHwId.__members__)
        return prog.attach(event, hardware=hardware, **opts)
    if target is not None and kind in (AttachKind.UPROBE, AttachKind.KPROBE):
        retprobe = bool(prog.spec is not None and prog.spec.section_info.kind is not None
                        and SecFlags.RETPROBE in prog.spec.section_info.kind.flags)
        return prog.attach(target, retprobe=retprobe, **opts)
    return prog.attach(target, **opts)


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return text[0] if text else type(err).__name__

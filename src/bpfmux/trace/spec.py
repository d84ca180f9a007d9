"""Probe specs in bpftrace's spelling, parsed into :class:`ProbeSpec`.

| spec | kind | aliases |
| --- | --- | --- |
| ``tracepoint:SUBSYS:NAME`` | ``tracepoint`` | ``t:`` |
| ``rawtracepoint:NAME`` (or ``rawtracepoint:SUBSYS:NAME``) | ``rawtracepoint`` | ``rt:`` |
| ``uprobe:PATH:FUNC`` / ``uretprobe:PATH:FUNC`` | ``uprobe`` / ``uretprobe`` | ``u:`` / ``ur:`` |
| ``kprobe:FUNC`` / ``kretprobe:FUNC`` (``MODULE:FUNC`` too) | ``kprobe`` / ``kretprobe`` | ``k:`` / ``kr:`` |
| ``fentry:FUNC`` / ``fexit:FUNC`` (``MODULE:FUNC`` too) | ``fentry`` / ``fexit`` | ``f:``, ``kfunc:`` / ``fr:``, ``kretfunc:`` |
| ``profile:hz:N`` (also ``s``, ``ms``, ``us`` units) | ``profile`` | ``p:`` |
| ``software:EVENT[:N]`` | ``software`` | ``s:`` |

Names may be shell globs (``*``, ``?``, ``[...]``) everywhere a name is
expected (not in paths' directories, rates or periods). Malformed specs raise
:class:`~bpfmux.errors.ParseError` with a message that shows the right form.
"""

from __future__ import annotations

from ..errors import ParseError
from ..record import Frozen
from ..record import set_field as _set

__all__ = ["KINDS", "SOFTWARE_EVENTS", "ProbeSpec", "is_glob", "parse_probe", "parse_probes", "validate_glob"]


_ALIASES = {
    "t": "tracepoint",
    "tracepoint": "tracepoint",
    "rt": "rawtracepoint",
    "rawtracepoint": "rawtracepoint",
    "u": "uprobe",
    "uprobe": "uprobe",
    "ur": "uretprobe",
    "uretprobe": "uretprobe",
    "k": "kprobe",
    "kprobe": "kprobe",
    "kr": "kretprobe",
    "kretprobe": "kretprobe",
    "f": "fentry",
    "fentry": "fentry",
    "kfunc": "fentry",
    "fr": "fexit",
    "fexit": "fexit",
    "kretfunc": "fexit",
    "p": "profile",
    "profile": "profile",
    "s": "software",
    "software": "software",
}

#: every probe kind, in the order ``--help`` lists them
KINDS = ("tracepoint", "rawtracepoint", "uprobe", "uretprobe", "kprobe", "kretprobe", "fentry", "fexit",
         "profile", "software")  # fmt: skip

#: software event name (bpftrace's spelling and its short alias) → (PerfSwId name, default period)
SOFTWARE_EVENTS: dict[str, tuple[str, int]] = {
    "cpu-clock": ("cpu_clock", 1000000),
    "cpu": ("cpu_clock", 1000000),
    "task-clock": ("task_clock", 1000000),
    "page-faults": ("page_faults", 100),
    "faults": ("page_faults", 100),
    "context-switches": ("context_switches", 1000),
    "cs": ("context_switches", 1000),
    "cpu-migrations": ("cpu_migrations", 1),
    "minor-faults": ("page_faults_min", 100),
    "major-faults": ("page_faults_maj", 1),
    "alignment-faults": ("alignment_faults", 1),
    "emulation-faults": ("emulation_faults", 1),
    "dummy": ("dummy", 1),
    "bpf-output": ("bpf_output", 1),
}

_PROFILE_UNITS = {"hz": None, "s": 1_000_000_000, "ms": 1_000_000, "us": 1_000}

_FORMS = {
    "tracepoint": "tracepoint:SUBSYS:NAME (e.g. tracepoint:syscalls:sys_enter_openat)",
    "rawtracepoint": "rawtracepoint:NAME (e.g. rawtracepoint:sched_switch)",
    "uprobe": "uprobe:PATH:FUNC (e.g. uprobe:/usr/lib/x86_64-linux-gnu/libc.so.6:str* or uprobe:libc:malloc)",
    "uretprobe": "uretprobe:PATH:FUNC (e.g. uretprobe:libc:malloc)",
    "kprobe": "kprobe:FUNC (e.g. kprobe:vfs_*)",
    "kretprobe": "kretprobe:FUNC (e.g. kretprobe:vfs_read)",
    "fentry": "fentry:FUNC (e.g. fentry:vfs_read)",
    "fexit": "fexit:FUNC (e.g. fexit:vfs_read)",
    "profile": "profile:hz:N (e.g. profile:hz:99; units hz, s, ms, us)",
    "software": "software:EVENT:N (e.g. software:page-faults:100)",
}


def is_glob(text: str) -> bool:
    """True when ``text`` has shell glob characters."""
    return any(c in text for c in "*?[")


def validate_glob(text: str, what: str, spec: str) -> None:
    """Check that the brackets of a glob are balanced and non-empty.

    :raises ParseError: ``[`` without ``]``, an empty ``[]``, or a stray ``]``.
    """
    i = 0
    while i < len(text):
        c = text[i]
        if c == "[":
            j = text.find("]", i + 2 if i + 1 < len(text) and text[i + 1] in "!^" else i + 1)
            if j == -1 or j == i + 1:
                raise ParseError(f"bad glob in {what} of {spec!r}: '[' at column {i + 1} has no matching ']' "
                                 "(write a set like [abc] or quote the spec)")  # fmt: skip
            i = j + 1
            continue
        if c == "]":
            raise ParseError(f"bad glob in {what} of {spec!r}: ']' at column {i + 1} without '['")
        i += 1


class ProbeSpec(Frozen):
    """One parsed probe spec.

    :ivar kind: one of :data:`KINDS`.
    :ivar text: the spec as written.
    :ivar category: tracepoint subsystem (``tracepoint``/``rawtracepoint``), or
        kernel module (``kprobe``/``fentry``), else ``""``.
    :ivar path: binary of a uprobe (as written: path or library name).
    :ivar name: tracepoint/function name or glob; the software event name;
        ``profile``'s unit.
    :ivar rate: profile frequency in Hz (or period in ns for time units) /
        software sample period.
    """

    __slots__ = ("kind", "text", "category", "path", "name", "rate")

    kind: str
    text: str
    category: str
    path: str
    name: str
    rate: int

    def __init__(self, kind: str, text: str, category: str = "", path: str = "", name: str = "", rate: int = 0) -> None:
        _set(self, "kind", kind)
        _set(self, "text", text)
        _set(self, "category", category)
        _set(self, "path", path)
        _set(self, "name", name)
        _set(self, "rate", rate)

    @property
    def is_glob(self) -> bool:
        """True when the spec names several things by a glob."""
        return is_glob(self.name) or is_glob(self.category)

    @property
    def canonical(self) -> str:
        """The spec in long form (``t:sched:*`` → ``tracepoint:sched:*``)."""
        if self.kind == "tracepoint":
            return f"tracepoint:{self.category}:{self.name}"
        if self.kind == "rawtracepoint":
            return f"rawtracepoint:{self.category + ':' if self.category else ''}{self.name}"
        if self.kind in ("uprobe", "uretprobe"):
            return f"{self.kind}:{self.path}:{self.name}"
        if self.kind in ("kprobe", "kretprobe", "fentry", "fexit"):
            return f"{self.kind}:{self.category + ':' if self.category else ''}{self.name}"
        return f"{self.kind}:{self.name}:{self.rate}"


def _need(ok: bool, kind: str, spec: str, why: str) -> None:
    if not ok:
        raise ParseError(f"bad probe {spec!r}: {why}; write {_FORMS[kind]}")


def _ident(text: str, kind: str, spec: str, what: str) -> None:
    _need(bool(text), kind, spec, f"empty {what}")
    bad = [c for c in text if c.isspace() or c in ":/\\\"'{}()" or ord(c) < 32]
    _need(not bad, kind, spec, f"{what} {text!r} has the character {bad[0]!r}" if bad else "")
    validate_glob(text, what, spec)


def _positive(text: str, kind: str, spec: str, what: str) -> int:
    try:
        v = int(text, 0)
    except ValueError:
        v = -1
    _need(v > 0, kind, spec, f"{what} {text!r} is not a positive integer")
    return v


def parse_probe(text: str) -> ProbeSpec:
    """Parse one probe spec (module doc for the forms).

    :raises ParseError: unknown kind, missing or malformed parts, bad glob.
    """
    if not isinstance(text, str):
        raise ParseError(f"a probe spec must be text, not {type(text).__name__}")
    spec = text.strip()
    head, sep, rest = spec.partition(":")
    kind = _ALIASES.get(head)
    if kind is None or not sep:
        known = ", ".join(KINDS)
        if not sep:
            raise ParseError(f"bad probe {text!r}: no ':' after the probe kind; a probe looks like "
                             f"'tracepoint:syscalls:sys_enter_openat' (kinds: {known})")  # fmt: skip
        raise ParseError(f"bad probe {text!r}: unknown probe kind {head!r}; kinds: {known}")
    if kind == "tracepoint":
        cat, sep2, name = rest.partition(":")
        _need(bool(sep2), kind, text, "missing ':' between subsystem and name")
        _ident(cat, kind, text, "subsystem")
        _ident(name, kind, text, "tracepoint name")
        return ProbeSpec(kind, text, category=cat, name=name)
    if kind == "rawtracepoint":
        parts = rest.split(":")
        _need(len(parts) in (1, 2), kind, text, "too many ':'")
        cat, name = (parts[0], parts[1]) if len(parts) == 2 else ("", parts[0])
        if len(parts) == 2:
            _ident(cat, kind, text, "subsystem")
        _ident(name, kind, text, "tracepoint name")
        return ProbeSpec(kind, text, category=cat, name=name)
    if kind in ("uprobe", "uretprobe"):
        path, sep2, func = rest.rpartition(":")
        _need(bool(sep2) and bool(path), kind, text, "missing binary path or ':' before the function")
        _need(not any(c.isspace() or ord(c) < 32 for c in path), kind, text, f"path {path!r} has a blank")
        _need(not is_glob(path), kind, text, "globs are allowed in the function name only, not in the path")
        _need(bool(func), kind, text, "empty function name")
        base, plus, off = func.partition("+")
        if func[0].isdigit():
            try:
                int(func, 0)
            except ValueError:
                _need(False, kind, text, f"bad file offset {func!r}")
        else:
            _ident(base, kind, text, "function name")
            if plus:
                _need(not is_glob(base), kind, text, "an offset needs one function, not a glob")
                try:
                    int(off, 0)
                except ValueError:
                    _need(False, kind, text, f"bad offset {off!r}")
        return ProbeSpec(kind, text, path=path, name=func)
    if kind in ("kprobe", "kretprobe", "fentry", "fexit"):
        parts = rest.split(":")
        _need(len(parts) in (1, 2), kind, text, "too many ':'")
        mod, name = (parts[0], parts[1]) if len(parts) == 2 else ("", parts[0])
        if mod:
            _ident(mod, kind, text, "module")
        base, plus, off = name.partition("+")
        _ident(base, kind, text, "function name")
        if plus:
            _need(kind in ("kprobe",) and not is_glob(base), kind, text, "an offset is only allowed on one kprobe")
            try:
                int(off, 0)
            except ValueError:
                _need(False, kind, text, f"bad offset {off!r}")
        return ProbeSpec(kind, text, category=mod, name=name)
    if kind == "profile":
        unit, sep2, n = rest.partition(":")
        _need(bool(sep2) and unit in _PROFILE_UNITS, kind, text, f"unit must be one of {', '.join(_PROFILE_UNITS)}")
        return ProbeSpec(kind, text, name=unit, rate=_positive(n, kind, text, "rate"))
    # software
    event, sep2, n = rest.partition(":")
    _need(event in SOFTWARE_EVENTS, kind, text,
          f"unknown software event {event!r} (known: {', '.join(SOFTWARE_EVENTS)})")  # fmt: skip
    period = _positive(n, kind, text, "sample period") if sep2 else SOFTWARE_EVENTS[event][1]
    return ProbeSpec(kind, text, name=event, rate=period)


def parse_probes(texts: list[str]) -> list[ProbeSpec]:
    """Parse several specs (a comma-separated argument counts as several).

    :raises ParseError: no spec, or a bad one (its message names it).
    """
    out: list[ProbeSpec] = []
    for t in texts:
        for part in _split_commas(t):
            if part.strip():
                out.append(parse_probe(part))
    if not out:
        raise ParseError("no probe given; e.g. 'bpfmux trace tracepoint:syscalls:sys_enter_*'")
    return out


def _split_commas(text: str) -> list[str]:
    """Split on commas outside ``[...]`` sets."""
    parts: list[str] = []
    cur: list[str] = []
    depth = 0
    for c in text:
        if c == "[":
            depth += 1
        elif c == "]" and depth:
            depth -= 1
        if c == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(c)
    parts.append("".join(cur))
    return parts

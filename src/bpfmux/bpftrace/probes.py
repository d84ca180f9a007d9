"""Attach points: bpftrace's spelling parsed, expanded on a kernel, and
grouped into the attachments the programs are compiled for.

:func:`parse_attach_point` reads one attach point (``kprobe:vfs_*``,
``uretprobe:/bin/bash:readline``, ``interval:s:1``, ``BEGIN`` …, with
bpftrace's short forms ``k: kr: u: ur: t: rt: p: i: s: h: f: fr:``).
:func:`resolve` expands every probe block's attach points through the
tracer's planner (:func:`bpfmux.trace.plan.plan`), so each wildcard and each
probe list becomes one multi-attach (one ``uprobe_multi`` link per binary,
one filtered ``sys_enter`` raw tracepoint for any set of syscalls, …), and
returns the :class:`Context` list each block is compiled for.
"""

from __future__ import annotations

import re
from typing import Any

from ..errors import BpfmuxError, NotFoundError, NotSupportedError, ParseError
from ..record import Value
from ..trace.plan import Group, Mechanism, Resolver, TraceOptions, plan
from ..trace.spec import ProbeSpec, is_glob, parse_probe
from . import ast as A
from .errors import Loc, ScriptError, Source

__all__ = ["AttachSpec", "Context", "ProbeTarget", "Resolution", "parse_attach_point", "resolve"]

_PROVIDERS = {
    "BEGIN": "BEGIN", "END": "END",
    "kprobe": "kprobe", "k": "kprobe", "kretprobe": "kretprobe", "kr": "kretprobe",
    "uprobe": "uprobe", "u": "uprobe", "uretprobe": "uretprobe", "ur": "uretprobe",
    "usdt": "usdt", "U": "usdt",
    "tracepoint": "tracepoint", "t": "tracepoint", "rawtracepoint": "rawtracepoint", "rt": "rawtracepoint",
    "profile": "profile", "p": "profile", "interval": "interval", "i": "interval",
    "software": "software", "s": "software", "hardware": "hardware", "h": "hardware",
    "kfunc": "kfunc", "f": "kfunc", "kretfunc": "kretfunc", "fr": "kretfunc",
    "fentry": "kfunc", "fexit": "kretfunc",
    "watchpoint": "watchpoint", "w": "watchpoint", "asyncwatchpoint": "asyncwatchpoint", "aw": "asyncwatchpoint",
    "iter": "iter", "it": "iter",
}  # fmt: skip
_TIME_UNITS = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "hz": 0}
_HARDWARE = {"cpu-cycles": "cpu_cycles", "cycles": "cpu_cycles", "instructions": "instructions",
             "cache-references": "cache_references", "cache-misses": "cache_misses",
             "branch-instructions": "branch_instructions", "branches": "branch_instructions",
             "branch-misses": "branch_misses", "bus-cycles": "bus_cycles", "ref-cycles": "ref_cpu_cycles"}  # fmt: skip
_HARDWARE_PERIOD = 1_000_000
#: bpftrace's probe kinds that become a trace.spec kind
_SPEC_KIND = {"kprobe": "kprobe", "kretprobe": "kretprobe", "uprobe": "uprobe", "uretprobe": "uretprobe",
              "tracepoint": "tracepoint", "rawtracepoint": "rawtracepoint", "kfunc": "fentry", "kretfunc": "fexit",
              "profile": "profile", "software": "software"}  # fmt: skip


class AttachSpec(Value):
    """One parsed attach point.

    :ivar provider: bpftrace's long name (``kprobe``, ``tracepoint``, ``BEGIN`` …).
    :ivar text: the attach point as written (parameters substituted).
    :ivar parts: the ``:``-separated parts after the provider.
    :ivar spec: the tracer's :class:`~bpfmux.trace.spec.ProbeSpec` (``None``
        for ``BEGIN``, ``END``, ``interval``, ``hardware``).
    :ivar period_ns: ``interval``: its period; ``hardware``: its sample period.
    """

    __slots__ = ("provider", "text", "parts", "loc", "spec", "period_ns")

    provider: str
    text: str
    parts: list[str]
    loc: Loc
    spec: ProbeSpec | None
    period_ns: int

    def __init__(
        self,
        provider: str,
        text: str,
        parts: list[str],
        loc: Loc,
        spec: ProbeSpec | None = None,
        period_ns: int = 0,
    ) -> None:
        self.provider = provider
        self.text = text
        self.parts = parts
        self.loc = loc
        self.spec = spec
        self.period_ns = period_ns

    @property
    def wildcard(self) -> bool:
        """Whether the attach point names several probes by a glob."""
        return any(is_glob(p) for p in self.parts)


class ProbeTarget(Value):
    """One probe a context covers.

    :ivar idx: its index (what the ``probe`` builtin stores, the BPF cookie).
    :ivar name: its full name as ``probe`` prints it.
    :ivar info: what code generation needs (tracepoint, syscall number, function).
    """

    __slots__ = ("idx", "name", "info")

    idx: int
    name: str
    info: dict[str, Any]

    def __init__(self, idx: int, name: str, info: dict[str, Any] | None = None) -> None:
        self.idx = idx
        self.name = name
        self.info = {} if info is None else info


class Context(Value):
    """One program to generate: a probe block on one group of probes.

    :ivar block: the probe block's index in the script.
    :ivar provider: bpftrace's probe kind.
    :ivar how: the attach :class:`~bpfmux.trace.plan.Mechanism`, or
        ``"special"`` (``BEGIN``/``END``/``interval``: run by bpfmux through
        test runs), ``"hardware"``, or ``"skipped"`` (a block none of whose
        attach points exists: checked, not loaded).
    :ivar group: the planner's group (``None`` for specials).
    :ivar targets: the probes covered, in attach order.
    :ivar lone: the block's only attach point, not a glob: a probe of it that
        cannot attach is an error (in a list or a glob it is skipped, as in bpftrace).
    """

    __slots__ = ("block", "provider", "how", "group", "targets", "attach", "retprobe", "lone")

    block: int
    provider: str
    how: Mechanism | str
    group: Group | None
    targets: list[ProbeTarget]
    attach: AttachSpec
    retprobe: bool
    lone: bool

    def __init__(
        self,
        block: int,
        provider: str,
        how: Mechanism | str,
        group: Group | None,
        targets: list[ProbeTarget],
        attach: AttachSpec,
        retprobe: bool = False,
        lone: bool = False,
    ) -> None:
        self.block = block
        self.provider = provider
        self.how = how
        self.group = group
        self.targets = targets
        self.attach = attach
        self.retprobe = retprobe
        self.lone = lone

    @property
    def name(self) -> str:
        """The first probe's name (the program's display name)."""
        return self.targets[0].name if self.targets else self.attach.text


class Resolution(Value):
    """Every block's contexts, and what resolving them had to say.

    :ivar contexts: per probe block, its contexts.
    :ivar warnings: bpftrace-style warnings (an attach point of a list that matched nothing, …).
    :ivar names: probe index → name, for ``probe``.
    """

    __slots__ = ("contexts", "warnings", "names")

    contexts: list[list[Context]]
    warnings: list[str]
    names: list[str]

    def __init__(
        self,
        contexts: list[list[Context]],
        warnings: list[str] | None = None,
        names: list[str] | None = None,
    ) -> None:
        self.contexts = contexts
        self.warnings = [] if warnings is None else warnings
        self.names = [] if names is None else names

    @property
    def num_probes(self) -> int:
        """What bpftrace counts in "Attaching N probes...": a kprobe glob that
        bpftrace 0.17 attaches with one kprobe_multi link counts once."""
        return sum(max(1, len(c.targets)) if c.how == "special"
                   else 1 if c.how == Mechanism.KPROBE_MULTI and c.attach.wildcard and c.targets
                   else len(c.targets)
                   for cs in self.contexts for c in cs)  # fmt: skip


def _split_parts(text: str) -> list[str]:
    """Split on ``:`` outside double quotes, unquoting quoted parts."""
    parts, cur, quoted, i = [], [], False, 0
    while i < len(text):
        ch = text[i]
        if ch == '"':
            quoted = not quoted
        elif ch == "\\" and quoted and i + 1 < len(text):
            cur.append(text[i + 1])
            i += 1
        elif ch == ":" and not quoted:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
        i += 1
    parts.append("".join(cur))
    return parts


def _substitute_params(text: str, params: list[str], loc: Loc, source: Source | None) -> str:
    def one(m: re.Match[str]) -> str:
        n = int(m.group(1))
        if n == 0 or n > len(params):
            raise ScriptError(f"positional parameter ${n} used in an attach point was not given", loc, source,
                              expected=f"bpftrace ... {' '.join(['ARG'] * max(n, 1))}")  # fmt: skip
        return params[n - 1]

    return re.sub(r"\$(\d+)", one, text)


def parse_attach_point(ap: A.AttachPoint, params: list[str] | None = None, source: Source | None = None) -> AttachSpec:
    """Parse one attach point (module docstring).

    :raises ScriptError: an unknown provider, a wrong number of parts, a bad
        rate or period, or a provider bpfmux does not implement (watchpoint, iter).
    """
    text = _substitute_params(ap.text, params or [], ap.loc, source)

    def bad(why: str, expected: str | None = None) -> ScriptError:
        return ScriptError(f"invalid attach point '{text}': {why}", ap.loc, source, expected=expected,
                           construct="attach point")  # fmt: skip

    parts = _split_parts(text)
    head = parts[0]
    provider = _PROVIDERS.get(head)
    if provider is None:
        if len(parts) == 1:
            raise bad("no probe type", "a probe such as 'kprobe:FUNC', 'tracepoint:CAT:NAME', 'BEGIN' or 'END'")
        raise bad(f"unknown probe type '{head}'",
                  "one of kprobe, kretprobe, uprobe, uretprobe, usdt, tracepoint, rawtracepoint, profile, interval, "
                  "software, hardware, kfunc, kretfunc, BEGIN, END")  # fmt: skip
    rest = parts[1:]
    spec = AttachSpec(provider, text, rest, ap.loc)
    if provider in ("BEGIN", "END"):
        if rest:
            raise bad(f"{provider} takes no arguments", f"'{provider}'")
        return spec
    if provider in ("watchpoint", "asyncwatchpoint", "iter"):
        raise ScriptError(f"{provider} probes are not supported by bpfmux", ap.loc, source, construct=provider)
    if provider == "interval":
        if len(rest) != 2 or rest[0] not in _TIME_UNITS:
            raise bad("interval takes a unit and a count", "interval:s:N, interval:ms:N, interval:us:N or interval:hz:N")
        n = _positive(rest[1], bad)
        spec.period_ns = _TIME_UNITS[rest[0]] * n if rest[0] != "hz" else 1_000_000_000 // n
        return spec
    if provider == "hardware":
        if len(rest) not in (1, 2) or rest[0] not in _HARDWARE:
            raise bad("unknown hardware event", ", ".join(f"hardware:{k}[:N]" for k in _HARDWARE))
        spec.period_ns = _positive(rest[1], bad) if len(rest) == 2 else _HARDWARE_PERIOD
        return spec
    if provider == "usdt":
        raise ScriptError("usdt probes are not supported by bpfmux yet", ap.loc, source, construct="usdt")
    if provider in ("uprobe", "uretprobe") and len(rest) == 1:
        raise bad("a uprobe needs a binary and a function", f"{provider}:BINARY:FUNCTION")
    if provider in ("profile",) and len(rest) == 1:
        rest = ["hz", rest[0]]
    if provider in ("software",) and len(rest) == 1:
        rest = [rest[0]]
    kind = _SPEC_KIND[provider]
    body = ":".join(rest)
    if provider in ("uprobe", "uretprobe"):
        body = ":".join(rest[:-1]) + ":" + rest[-1]
    try:
        spec.spec = parse_probe(f"{kind}:{body}")
    except ParseError as e:
        raise bad(e.message.split(": ", 1)[-1] if "bad probe" in e.message else e.message) from None
    return spec


def _positive(text: str, bad: Any) -> int:
    try:
        v = int(text, 0)
    except ValueError:
        v = -1
    if v <= 0:
        raise bad(f"'{text}' is not a positive integer")
    return v


def _mode_for(spec: AttachSpec, uses_args: bool) -> str:
    """The planner mode: ``args`` when the block reads a tracepoint's record."""
    if uses_args and spec.provider == "tracepoint" and spec.spec is not None and spec.spec.category != "raw_syscalls":
        return "args"
    return "count"


def resolve(program: A.Program, kernel: Resolver, *, params: list[str] | None = None,
            source: Source | None = None, pid: int | None = None) -> Resolution:
    """Expand every block's attach points on ``kernel`` into contexts.

    An attach point of a list (or a glob) that matches nothing is skipped
    with a warning, as bpftrace does; a single exact one is an error.

    :raises ScriptError: a malformed attach point, or one that matches nothing.
    :raises NotSupportedError: the kernel lacks what a lone attach point needs.
    """
    res = Resolution([])
    for bi, probe in enumerate(program.probes):
        uses_args = any(isinstance(n, A.Builtin) and n.name == "args" for n in A.walk(probe))
        specs = [parse_attach_point(ap, params, source) for ap in probe.attach_points]
        contexts: list[Context] = []
        plannable: list[tuple[AttachSpec, str]] = []
        for s in specs:
            if s.provider in ("BEGIN", "END", "interval"):
                contexts.append(Context(bi, s.provider, "special", None, [_new_target(res, s.text, {})], s))
                continue
            if s.provider == "hardware":
                contexts.append(Context(bi, s.provider, "hardware", None, [_new_target(res, s.text, {})], s))
                continue
            assert s.spec is not None
            mode = _mode_for(s, uses_args)
            try:
                plan([s.spec], TraceOptions(mode=mode, pid=pid), kernel)
            except (NotFoundError, NotSupportedError) as e:
                if len(specs) > 1 or s.wildcard or s.provider in ("uprobe", "uretprobe"):
                    res.warnings.append(f"{s.text}: {e}; skipping it")
                    continue
                if isinstance(e, NotSupportedError):
                    raise ScriptError(str(e), s.loc, source, construct=f"probe {s.text}") from None
                raise ScriptError(f"attach point {s.text} matches nothing: {e}", s.loc, source,
                                  construct=f"probe {s.text}") from None  # fmt: skip
            except BpfmuxError as e:
                raise ScriptError(f"attach point {s.text}: {e}", s.loc, source, construct=f"probe {s.text}") from None
            plannable.append((s, mode))
        for mode in ("count", "args"):
            chosen = [s for s, m in plannable if m == mode]
            if not chosen:
                continue
            groups, _ = plan([s.spec for s in chosen if s.spec is not None], TraceOptions(mode=mode, pid=pid), kernel)
            for g in groups:
                owner = next((s for s in chosen if s.spec is not None and s.spec.text == g.spec.text), chosen[0])
                targets = [_new_target(res, _display(p.name), p.info) for p in g.probes]
                if g.how in (Mechanism.FENTRY, Mechanism.FEXIT):  # one program per function (its own prototype)
                    for t, target in zip(targets, g.targets, strict=True):
                        one = Group(g.spec, g.how, [g.probes[targets.index(t)]], [target], g.retprobe, g.role)
                        contexts.append(Context(bi, owner.provider, g.how, one, [t], owner, retprobe=g.retprobe))
                    continue
                contexts.append(Context(bi, owner.provider, g.how, g, targets, owner, retprobe=g.retprobe,
                                        lone=len(specs) == 1 and not owner.wildcard))  # fmt: skip
        contexts.sort(key=lambda c: next(i for i, s in enumerate(specs) if s is c.attach))
        if not contexts:  # every attach point was skipped: still checked (its maps exist and print), never loaded
            contexts.append(Context(bi, specs[0].provider, "skipped", None, [], specs[0]))
        res.contexts.append(contexts)
    return res


def _display(name: str) -> str:
    """A planner probe name as bpftrace's ``probe`` prints it (``kfunc:``, not ``fentry:``)."""
    for ours, theirs in (("fentry:", "kfunc:"), ("fexit:", "kretfunc:")):
        if name.startswith(ours):
            return theirs + name[len(ours):]
    return name


def _new_target(res: Resolution, name: str, info: dict[str, Any]) -> ProbeTarget:
    t = ProbeTarget(len(res.names), name, dict(info))
    res.names.append(name)
    return t

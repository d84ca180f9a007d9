"""Drive an emulated kernel from a recorded call stream or a workload spec.

A call stream is JSON lines, one event per line::

    {"call": "bpf_fentry_test1", "args": [1], "repeat": 3}
    {"fire": "sched:sched_switch", "args": [0, 1, 2], "fields": {"prev_pid": 7}}
    {"kprobe": "vfs_read", "args": [1, 2, 3, 4]}
    {"test_run": "prog_name"}
    {"syscall": "openat", "args": [-100, 4096, 0], "ret": 3}
    {"user": "libc.so.6:strlen", "args": [4096], "ret": 5}
    {"sample": "cpu_clock"}
    {"task": {"pid": 42, "tgid": 42, "comm": "worker"}}
    {"clock": 1000000}

``call`` runs a kernel function through its probes and trampolines,
``fire`` hits a tracepoint, ``kprobe`` fires only a function's probes,
``syscall`` makes a system call as the kernel's syscall path shows it
(:meth:`~bpfmux.emu.Emulator.syscall`), ``user`` calls a user function
(uprobes; :meth:`~bpfmux.emu.Emulator.user_call`), ``sample`` delivers one
sample to the sampling perf events of an event.

A workload spec is a comma-separated list of ``FUNC(ARGS)*N``,
``tp:SYSTEM:EVENT*N``, ``sys:NAME*N``, ``user:BINARY:SYMBOL*N``,
``sample:EVENT*N`` and ``test_run`` items, e.g.
``bpf_fentry_test1(1)*100,tp:sched:sched_switch*5,sys:getpid*3,test_run``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ...errors import BpfmuxError, ParseError

#: Most times one event may repeat.
MAX_REPEAT = 10_000_000
#: Largest call stream read (a file or standard input).
MAX_STREAM_BYTES = 256 << 20


@dataclass
class Event:
    """One step of a call stream."""

    kind: str
    target: str = ""
    args: tuple[int, ...] = ()
    fields: dict[str, Any] = field(default_factory=dict)
    repeat: int = 1
    line: int = 0
    ret: int = 0


_KINDS = ("call", "fire", "kprobe", "syscall", "user", "sample", "test_run", "task", "clock")


def parse_calls(lines: Iterable[str], source: str = "<calls>") -> Iterator[Event]:
    """Parse a JSON-lines call stream (blank lines and ``#`` comments skipped).

    :raises ParseError: a line that is not one of the event objects above
        (the error carries the line number as ``offset``).
    """
    for n, raw in enumerate(lines, 1):
        text = raw.strip()
        if not text or text.startswith("#"):
            continue
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as e:
            raise ParseError(f"line {n}: not JSON ({e.msg})", None, source) from None
        if not isinstance(obj, dict):
            raise ParseError(f"line {n}: expected an object such as {{\"call\": \"f\", \"args\": [1]}}", None, source)
        kinds = [k for k in _KINDS if k in obj]
        if len(kinds) != 1:
            raise ParseError(f"line {n}: give exactly one of {', '.join(_KINDS)}", None, source)
        kind = kinds[0]
        value = obj[kind]
        args = obj.get("args", [])
        repeat = obj.get("repeat", 1)
        if not isinstance(args, list) or not all(isinstance(a, int) for a in args):
            raise ParseError(f"line {n}: args must be a list of integers", None, source)
        if not isinstance(repeat, int) or not 0 <= repeat <= MAX_REPEAT:
            raise ParseError(f"line {n}: repeat must be an integer from 0 to {MAX_REPEAT}", None, source)
        fields = obj.get("fields", {})
        if not isinstance(fields, dict):
            raise ParseError(f"line {n}: fields must be an object", None, source)
        ret = obj.get("ret", 0)
        if not isinstance(ret, int) or isinstance(ret, bool):
            raise ParseError(f"line {n}: ret must be an integer", None, source)
        if kind == "task":
            ok = isinstance(value, dict) and all(
                (k in ("pid", "tgid", "uid", "gid") and isinstance(v, int) and not isinstance(v, bool))
                or (k == "comm" and isinstance(v, str)) for k, v in value.items())
            if not ok:
                raise ParseError(f"line {n}: task must be an object like {{\"pid\": 1, \"tgid\": 1, \"comm\": "
                                 f"\"x\"}} (pid, tgid, uid, gid: integers; comm: text)", None, source)
            yield Event("task", fields=value, line=n)
        elif kind == "clock":
            if not isinstance(value, int):
                raise ParseError(f"line {n}: clock must be nanoseconds (an integer)", None, source)
            yield Event("clock", args=(value,), line=n)
        elif kind == "test_run":
            yield Event("test_run", "" if value is True else str(value), repeat=repeat, line=n)
        else:
            if not isinstance(value, str) or not value:
                raise ParseError(f"line {n}: {kind} needs a name", None, source)
            yield Event(kind, value, tuple(args), fields, repeat, n, ret)


_ITEM = re.compile(r"^\s*(?:(?P<tp>tp:[\w:/]+)|(?P<sys>sys:\w+)|(?P<user>user:[^*,]+)|(?P<sample>sample:\w+)"
                   r"|(?P<tr>test_run)|(?P<fn>[A-Za-z_]\w*)\((?P<args>[^)]*)\))\s*(?:\*\s*(?P<n>\d+))?\s*$")


def parse_workload(spec: str) -> list[Event]:
    """Parse a workload spec (see the module docstring).

    :raises ParseError: an item that is not ``FUNC(ARGS)[*N]``,
        ``tp:SYSTEM:EVENT[*N]`` or ``test_run``.
    """
    out = []
    for i, item in enumerate(_split(spec), 1):
        m = _ITEM.match(item)
        if not m:
            raise ParseError(f"workload item {i} ({item.strip()!r}): write FUNC(ARGS)*N, tp:SYSTEM:EVENT*N, "
                             "sys:NAME*N, user:BINARY:SYMBOL*N, sample:EVENT*N or test_run", i, "--workload")
        digits = m.group("n") or "1"
        n = int(digits) if len(digits) <= 9 else MAX_REPEAT + 1
        if n > MAX_REPEAT:
            raise ParseError(f"workload item {i}: repeat at most {MAX_REPEAT} times", i, "--workload")
        if m.group("tp"):
            out.append(Event("fire", m.group("tp")[3:], repeat=n))
        elif m.group("sys"):
            out.append(Event("syscall", m.group("sys")[4:], repeat=n))
        elif m.group("user"):
            out.append(Event("user", m.group("user")[5:].strip(), repeat=n))
        elif m.group("sample"):
            out.append(Event("sample", m.group("sample")[7:], repeat=n))
        elif m.group("tr"):
            out.append(Event("test_run", repeat=n))
        else:
            try:
                args = tuple(int(a, 0) for a in m.group("args").split(",") if a.strip())
            except ValueError:
                raise ParseError(f"workload item {i}: arguments must be integers", None, "--workload") from None
            out.append(Event("call", m.group("fn"), args, repeat=n))
    return out


def load_events(source: str) -> list[Event]:
    """Events from a call-stream file (``-``: standard input) or, when no
    such file exists, a workload spec.

    :raises ParseError: a malformed stream or spec.
    :raises OSError: the file cannot be read.
    """
    import os
    import sys

    from ...host.files import bounded_lines, open_text

    if source == "-":
        return list(parse_calls(bounded_lines(sys.stdin, "<stdin>", MAX_STREAM_BYTES), "<stdin>"))
    if os.path.exists(source):
        with open_text(source, MAX_STREAM_BYTES, "call stream") as f:
            return list(parse_calls(bounded_lines(f, source, MAX_STREAM_BYTES), source))
    return parse_workload(source)


def _split(spec: str) -> list[str]:
    items, depth, cur = [], 0, ""
    for ch in spec:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            items.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        items.append(cur)
    return items


def apply(emu: Any, events: Iterable[Event], programs: dict[str, Any] | None = None) -> int:
    """Feed events to ``emu``; returns how many calls/hits/test runs were made.

    :raises BpfmuxError: an event names an unknown function, tracepoint or
        program (the message gives the stream line).
    """
    from ..vm.runtime import Task

    done = 0
    for ev in events:
        where = f"line {ev.line}: " if ev.line else ""
        try:
            if ev.kind == "task":
                emu.vm.task = Task(**{k: v for k, v in ev.fields.items() if k in ("pid", "tgid", "comm", "uid", "gid")})
                continue
            if ev.kind == "clock":
                emu.vm.clock.set(ev.args[0])
                continue
            for _ in range(ev.repeat):
                if ev.kind == "call":
                    emu.call(ev.target, *ev.args)
                elif ev.kind == "fire":
                    emu.fire(ev.target, *ev.args, **ev.fields)
                elif ev.kind == "kprobe":
                    emu.kprobe_hit(ev.target, *ev.args)
                elif ev.kind == "syscall":
                    emu.syscall(ev.target, *ev.args, ret=ev.ret)
                elif ev.kind == "user":
                    emu.user_call(ev.target, *ev.args, ret=ev.ret)
                elif ev.kind == "sample":
                    emu.sample(ev.target)
                elif ev.kind == "test_run":
                    for prog in _pick(programs or {}, ev.target):
                        emu.test_run_tracing(prog)
                done += 1
        except BpfmuxError as err:
            if type(err) is BpfmuxError and where:
                raise BpfmuxError(f"{where}{err}") from None
            raise
    return done


def _pick(programs: dict[str, Any], name: str) -> list[Any]:
    """The programs whose test runs to make: the named one, else one per
    distinct test-run sequence the object's tracing programs need (the
    fentry/fexit one and the fmod_ret one)."""
    from ...uapi import AttachType, ProgType

    if name:
        if name not in programs:
            raise BpfmuxError(f"test_run: no program {name!r}; the object has {', '.join(programs)}")
        return [programs[name]]
    picked: dict[bool, Any] = {}
    for p in programs.values():
        if p.prog_type == ProgType.TRACING and p.attach_type != AttachType.TRACE_RAW_TP:
            picked.setdefault(p.attach_type == AttachType.MODIFY_RETURN, p)
    if not picked:
        raise BpfmuxError("test_run needs a tracing program (fentry/fexit/fmod_ret) in the object")
    return list(picked.values())

"""``bpfmux run OBJ``: load a libbpf-style object as its tool would, attach
its programs, print the events its ring/perf buffers carry, dump its maps."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from typing import Any

from ..uapi import MapType
from ._common import CliError, UsageError, ensure_root, ensure_tracefs, parse_command

DESCRIPTION = """\
Load any libbpf-style BPF object (clang -target bpf), set what its tool's
user space would set before load, attach each program by its ELF section name
as libbpf does (tracepoint/…, raw_tp/…, tp_btf/…, uprobe/…, uprobe.multi/…,
kprobe/…, perf_event, …), print the events its ring buffers and perf buffers
carry, and when it stops (Ctrl-C, -d, or the end of -c CMD) detach
everything and dump every map.

Before load: --set NAME=VALUE sets a global (.rodata const volatile, .data,
.bss) through its BTF type (numbers, true/false, enum names, text for char
arrays, 80,443 for arrays); --map-size NAME=N sizes a map (maps declared with
max_entries 0 get a default, with a note); --skip NAME leaves a program out;
--attach PROG=TARGET names what a program attaches to (a function, a
BINARY:FUNCTION for bare uprobe sections, an event for perf_event programs;
repeat it for several targets); --binary PATH completes uprobe sections that
name only a function (uretprobe/readline); --freq HZ sets the sampling
frequency of perf_event programs.

Programs that fail to load or attach are reported one by one and the others
run (--strict: stop instead). Twin programs on one hook (tp_btf and raw_tp,
fentry and kprobe versions of one probe) are detected and only the
best-supported one that attaches runs.

Events are decoded through the object's BTF (a struct of the record's size),
else its DWARF, else --event-type. Map entries are sorted (by value when the
values are counts); histograms kept in `slots` arrays are drawn (log2 unless
--hist NAME=linear[:STEP[:BASE]]); -i SECONDS prints each interval's counts.
"""

EPILOG = """\
examples:
  bpfmux run examples/objects/syscount.bpf.o -d 2          count syscalls for 2 s, dump the map
  bpfmux run examples/objects/getpid_events.bpf.o -c 'python3 -c "import os; os.getpid()"' \\
      --pid-var target_tgid                               print one event per getpid() of the command
  bpfmux run tests/bpf/ringbuf.bpf.o --set target_tgid=$$   events of this shell only
  bpfmux run runqlat.bpf.o -i 1 -d 5                      a histogram each second
  bpfmux run opensnoop.bpf.o --set targ_uid=-1            every user's opens (the tool's default)
  bpfmux run bashreadline.bpf.o --binary /bin/bash        uretprobe/readline on bash
  bpfmux run memleak.bpf.o --attach malloc_enter=libc:malloc --pid command -c ./prog
                                                          uprobes in the command only
  bpfmux run gethostlatency.bpf.o --attach handle_entry=libc:getaddrinfo \\
      --attach handle_return=libc:getaddrinfo              bare uprobe sections
  bpfmux run OBJ --json -d 1                              events and maps as JSON lines

exit status: 0 after the maps were dumped (also after Ctrl-C once attached),
3 when it ran but some programs did not load or attach (each is named on
stderr; --strict makes that status 1 before anything runs), 1 on an error
(one line; --debug adds the traceback and verifier log), 2 on bad usage
(e.g. --set without '='), 130 on Ctrl-C before the programs were attached.
Needs root (CAP_BPF and CAP_PERFMON).
"""

#: exit status: ran, but some programs did not load or attach
EXIT_PARTIAL = 3


def register(sub: Any) -> None:
    """Add ``run`` to the subcommand parsers."""
    p = sub.add_parser("run", help="load a BPF object, attach by section, print events, dump maps",
                       description=DESCRIPTION, epilog=EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("object", metavar="OBJ", help="BPF ELF object (.bpf.o)")
    p.add_argument("-d", "--duration", type=float, metavar="SECONDS", help="stop after SECONDS (default: Ctrl-C)")
    p.add_argument("-c", "--command", metavar="CMD", help="run CMD after attaching; stop when it exits")
    p.add_argument("-i", "--interval", type=float, metavar="SECONDS", help="print the maps' counts of each interval")
    load = p.add_argument_group("before load (what the tool's user space sets)")
    load.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                      help="set a global (.rodata, .data, .bss) through its BTF type")  # fmt: skip
    load.add_argument("--pid-var", metavar="NAME", help="with -c: set this global to the command's pid")
    load.add_argument("--map-size", action="append", default=[], metavar="NAME=N", help="max_entries of a map")
    load.add_argument("--map-value-size", action="append", default=[], metavar="NAME=BYTES",
                      help="value size of a map (stack-trace maps: depth * 8)")  # fmt: skip
    load.add_argument("--program", action="append", metavar="NAME", help="load and attach only these programs")
    load.add_argument("--skip", action="append", default=[], metavar="NAME", help="do not load this program")
    att = p.add_argument_group("attaching")
    att.add_argument("--attach", action="append", default=[], metavar="PROG=TARGET",
                     help="attach PROG to TARGET (function, BINARY:FUNCTION, perf event name); repeatable")
    att.add_argument("--binary", metavar="PATH", help="binary of uprobe sections that name only a function")
    att.add_argument("--pid", metavar="PID", help="uprobes fire only in this process ('command': the -c command)")
    att.add_argument("--freq", type=int, default=99, metavar="HZ",
                     help="sampling frequency of perf_event programs (default 99)")  # fmt: skip
    att.add_argument("--period", type=int, metavar="N", help="sample every N events instead of --freq")
    att.add_argument("--all-twins", action="store_true", help="attach every twin program, not only the best one")
    att.add_argument("--strict", action="store_true", help="stop when a program does not load or attach")
    out = p.add_argument_group("output")
    out.add_argument("--event-type", metavar="STRUCT", help="C type (BTF or DWARF) to decode buffer events with")
    out.add_argument("--hist", action="append", default=[], metavar="NAME=KIND",
                     help="slots of map/variable NAME are log2 (default) or linear[:STEP[:BASE]]")  # fmt: skip
    out.add_argument("--no-dump", action="store_true", help="do not dump the maps at exit")
    out.add_argument("--json", action="store_true", help="JSON lines for events and maps")
    out.add_argument("-v", "--verbose", action="store_true", help="say what was attached where")
    p.set_defaults(func=run)


def _check_usage(args: argparse.Namespace) -> dict[str, Any]:
    """The ``--hist`` kinds, once every argument makes sense.

    :raises UsageError: a malformed ``NAME=VALUE``, a bad duration, interval,
        frequency or command, options that need one another.
    """
    from ..errors import InvalidArgumentError
    from ..show.hist import parse_hist_spec
    from .run_setup import parse_pairs

    if args.pid_var and not args.command:
        raise UsageError("--pid-var needs -c CMD")
    if args.duration is not None and args.duration < 0:
        raise UsageError(f"-d needs a number of seconds of 0 or more, not {args.duration:g}")
    if args.interval is not None and args.interval <= 0:
        raise UsageError(f"-i needs a number of seconds above 0, not {args.interval:g}")
    if args.freq < 1 or (args.period is not None and args.period < 1):
        raise UsageError("--freq and --period take a number of 1 or more")
    if args.pid is not None:
        if args.pid == "command":
            if not args.command:
                raise UsageError("--pid command needs -c CMD")
        elif not args.pid.isdigit():
            raise UsageError(f"--pid takes a process id or 'command', not {args.pid!r}")
    if args.command is not None:
        parse_command(args.command)
    parse_pairs(args.set, "--set")
    parse_pairs(args.attach, "--attach")
    hists = {}
    for name, kind in parse_pairs(args.hist, "--hist"):
        try:
            hists[name] = parse_hist_spec(kind)
        except InvalidArgumentError as err:
            raise UsageError(f"--hist {name}: {err}") from None
    return hists


def run(args: argparse.Namespace) -> int:
    """Run ``bpfmux run`` (errors are reported by the caller's guard).

    :raises UsageError: bad arguments (see :func:`_check_usage`).
    :raises CliError: no such object, global, map, program or event type;
        not privileged; with ``--strict``, a program that did not load or attach.
    :raises BpfmuxError: a malformed object, a map the kernel refused.
    :raises OSError: a system call failed.
    """
    from ..errors import NotFoundError
    from ..live import LiveKernel
    from ..live.links import close_all
    from ..obj import load_object
    from ..show.events import EventTypes
    from ..trace.child import HeldChild
    from .run_setup import attach_all, configure

    hists = _check_usage(args)
    if not os.path.exists(args.object):
        raise CliError(f"no such file: {args.object}")
    data = open(args.object, "rb").read()
    spec = load_object(data)

    def say(msg: str) -> None:
        print(f"bpfmux: {msg}", file=sys.stderr)

    configure(spec, args, say)
    try:
        events = EventTypes(spec, data, args.event_type)
    except NotFoundError as err:
        raise CliError(f"--event-type {args.event_type}: {err}") from None
    if any(int(ms.type) in (MapType.RINGBUF, MapType.PERF_EVENT_ARRAY) for ms in spec.maps.values()):
        events.prepare()  # the DWARF index, before events arrive faster than they could be typed
    ensure_root("bpfmux run")
    ensure_tracefs()
    report = None
    readers: list[Any] = []
    coll = None
    child = None
    old_term = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        try:
            child = HeldChild(args.command) if args.command else None
            if child is not None and args.pid_var:
                configure_pid(spec, args.pid_var, child.pid)
            if args.pid is not None:
                args.pid = child.pid if args.pid == "command" and child is not None else int(args.pid)
            coll = LiveKernel().load(spec, programs=args.program, partial=True)
            for w in coll.warnings:
                say(f"warning: {w}")
            for name, why in coll.failed.items():
                say(f"{name} ({spec.programs[name].section}): not loaded: {_first_line(why)}")
            report = attach_all(coll, args, say)
            # a twin that did not load or attach is no failure when another program runs its hook
            failures = [n for n in coll.failed if n not in report.idle] + list(report.failed)
            if args.strict and failures:
                raise CliError(f"{len(failures)} program(s) did not load or attach: {', '.join(failures)} "
                               "(--strict)")
            if not report.links and failures:
                raise CliError(f"no program of {args.object} loaded and attached; each is named above")
            for mname, m in coll.maps.items():
                if int(m.type) in (MapType.RINGBUF, MapType.PERF_EVENT_ARRAY):
                    readers.append(_reader(args, events, mname, m, int(m.type)))
        except BaseException:
            if child is not None:
                child.abandon()
            if report is not None:
                close_all(report.links, parallel=True)
            raise
        links = report.links
        status = _loop(args, coll, child, readers, links, hists)
        for r in readers:
            r.consume()
        close_all(links, parallel=True)
        links.clear()
        if not args.no_dump:
            _dump_maps(args, coll, hists)
        sys.stdout.flush()
        if status == 0 and failures:
            return EXIT_PARTIAL
        return status
    finally:
        signal.signal(signal.SIGTERM, old_term)
        try:
            if report is not None:
                close_all(report.links, parallel=True)
        finally:
            for r in readers:
                r.close()
            if coll is not None:
                coll.close()
            if child is not None and child.status is None:
                child.abandon() if child._go >= 0 else child.wait()


def configure_pid(spec: Any, name: str, pid: int) -> None:
    """``--pid-var NAME``: set the global to the command's pid.

    :raises CliError: no such global.
    """
    from ..errors import NotFoundError

    try:
        spec.set_global(name, pid)
    except NotFoundError:
        raise CliError(f"--pid-var {name}: the object has no read-only global (const volatile) or .data/.bss "
                       f"variable called {name!r}") from None


def _loop(args: argparse.Namespace, coll: Any, child: Any, readers: list[Any], links: list[Any],
          hists: dict[str, Any]) -> int:
    """Poll the buffers until the end (``-d``, the command's exit, Ctrl-C); print intervals."""
    deadline = time.monotonic() + args.duration if args.duration is not None else None
    next_tick = time.monotonic() + args.interval if args.interval else None
    previous: dict[str, Any] = {}
    tick = 0
    try:  # from here on Ctrl-C means "stop and show what was collected"
        print(f"bpfmux: {len(links)} link{'s' * (len(links) != 1)} attached from {args.object}; "
              + (f"running {' '.join(child.argv)}" if child else "Ctrl-C to stop"), file=sys.stderr, flush=True)
        if child is not None:
            child.release()
        if next_tick is not None:
            previous = _read_all(coll)
        while True:
            if child is not None and child.poll() is not None:
                break
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                break
            if next_tick is not None and now >= next_tick:
                tick += 1
                previous = _print_interval(args, coll, previous, tick, hists)
                next_tick += args.interval
            if readers:
                for r in readers:
                    r.poll(0.05)
            else:
                time.sleep(0.05)
            sys.stdout.flush()
    except KeyboardInterrupt:
        pass
    return 0


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _reader(args: argparse.Namespace, events: Any, name: str, m: Any, t: int) -> Any:
    from ..show.values import plain, text

    warned: set[int] = set()

    def show(data: bytes, cpu: int | None = None) -> None:
        value, match = events.decode(data, perf=cpu is not None)
        if match.codec is None and len(data) not in warned:
            warned.add(len(data))
            print(f"bpfmux: {name}: {match.why}", file=sys.stderr)
        if args.json:
            rec: dict[str, Any] = {"map": name, "event": plain(value)}
            if cpu is not None:
                rec["cpu"] = cpu
            sys.stdout.write(json.dumps(rec) + "\n")
        else:
            where = f"{name}" + (f"[cpu {cpu}]" if cpu is not None else "")
            sys.stdout.write(f"{where}: {text(value)}\n")

    if t == MapType.RINGBUF:
        return m.reader(lambda data: show(bytes(data)))
    return m.reader(lambda cpu, data: show(bytes(data), cpu))


#: maps whose contents are not counts a person reads
_SKIP_TYPES = (MapType.RINGBUF, MapType.PERF_EVENT_ARRAY, MapType.PROG_ARRAY, MapType.STACK_TRACE,
               MapType.CGROUP_ARRAY)


def _dumpable(name: str, m: Any) -> bool:
    return int(m.type) not in _SKIP_TYPES and not name.startswith(".rodata") and name != ".kconfig"


def _read_all(coll: Any, sum_cpus: bool = True) -> dict[str, Any]:
    from ..show.maps import read_map

    out: dict[str, Any] = {}
    for name, m in coll.maps.items():
        if _dumpable(name, m):
            try:
                out[name] = read_map(name, m, sum_cpus=sum_cpus)
            except Exception as e:  # one unreadable map must not hide the others
                out[name] = e
    return out


def _print_interval(args: argparse.Namespace, coll: Any, previous: dict[str, Any], tick: int,
                    hists: dict[str, Any]) -> dict[str, Any]:
    from ..show.maps import Reading, render, since
    from ..show.values import plain

    current = _read_all(coll)
    if not args.json:
        sys.stdout.write(f"\n@ {time.strftime('%H:%M:%S')} (interval {tick}):\n")
    for name, reading in current.items():
        if not isinstance(reading, Reading):
            continue
        prev = previous.get(name)
        delta = since(reading, prev if isinstance(prev, Reading) else None)
        if args.json:
            sys.stdout.write(json.dumps({"interval": tick, "map": name,
                                         "items": [[plain(k), plain(v)] for k, v in delta.entries]}) + "\n")
        elif delta.entries:
            sys.stdout.write("\n".join(render(delta, hists)) + "\n")
    return current


def _dump_maps(args: argparse.Namespace, coll: Any, hists: dict[str, Any]) -> None:
    from ..show.maps import Reading, render
    from ..show.values import plain, sort_key

    for name, reading in _read_all(coll, sum_cpus=not args.json).items():
        if not isinstance(reading, Reading):
            print(f"bpfmux: cannot dump map {name}: {reading}", file=sys.stderr)
            continue
        if args.json:
            entries = reading.entries if reading.section else sorted(reading.entries, key=lambda kv: sort_key(kv[0]))
            sys.stdout.write(json.dumps({"map": name, "items": [[plain(k), plain(v)] for k, v in entries]}) + "\n")
            continue
        sys.stdout.write("\n" + "\n".join(render(reading, hists)) + "\n")


def _first_line(err: BaseException) -> str:
    lines = str(err).strip().splitlines()
    return lines[0] if lines else type(err).__name__

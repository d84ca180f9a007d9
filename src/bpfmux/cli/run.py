"""``bpfmux run OBJ``: load a libbpf-style object, attach every program by
its section name, print ring/perf buffer events, dump the maps at exit."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from typing import Any

from ._common import CliError, UsageError, ensure_root, ensure_tracefs, parse_command

DESCRIPTION = """\
Load any libbpf-style BPF object (clang -target bpf), attach each program by
its ELF section name as libbpf does (tracepoint/…, raw_tp/…, tp_btf/…,
uprobe/…, uprobe.multi/…, kprobe/…, perf_event, …), print the events its ring
buffers and perf buffers carry (decoded through the object's BTF: a struct of
the record's size, or --event-type), and when it stops (Ctrl-C, -d, or the end
of -c CMD) detach everything and dump every map, decoded.

Read-only globals (const volatile, .rodata) can be set before loading with
--set NAME=VALUE (e.g. --set target_tgid=1234); -c CMD sets NAME=PID for the
variable given with --pid-var.
"""

EPILOG = """\
examples:
  bpfmux run examples/objects/syscount.bpf.o -d 2          count syscalls for 2 s, dump the map
  bpfmux run examples/objects/getpid_events.bpf.o -c 'python3 -c "import os; os.getpid()"' \\
      --pid-var target_tgid                               print one event per getpid() of the command
  bpfmux run tests/bpf/ringbuf.bpf.o --set target_tgid=$$   events of this shell only
  bpfmux run OBJ --json -d 1                              events and maps as JSON lines

exit status: 0 after the maps were dumped (also after Ctrl-C once attached),
1 on an error (one line; --debug adds the traceback and verifier log), 2 on
bad usage (e.g. --set without '='), 130 on Ctrl-C before the programs were
attached. Needs root (CAP_BPF and CAP_PERFMON).
"""


def register(sub: Any) -> None:
    """Add ``run`` to the subcommand parsers."""
    p = sub.add_parser("run", help="load a BPF object, attach by section, print events, dump maps",
                       description=DESCRIPTION, epilog=EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("object", metavar="OBJ", help="BPF ELF object (.bpf.o)")
    p.add_argument("-d", "--duration", type=float, metavar="SECONDS", help="stop after SECONDS (default: Ctrl-C)")
    p.add_argument("-c", "--command", metavar="CMD", help="run CMD after attaching; stop when it exits")
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                   help="set a read-only global (.rodata) before loading")  # fmt: skip
    p.add_argument("--pid-var", metavar="NAME", help="with -c: set this read-only global to the command's pid")
    p.add_argument("--event-type", metavar="STRUCT", help="BTF struct to decode buffer events with")
    p.add_argument("--program", action="append", metavar="NAME", help="load and attach only these programs")
    p.add_argument("--no-dump", action="store_true", help="do not dump the maps at exit")
    p.add_argument("--json", action="store_true", help="JSON lines for events and maps")
    p.add_argument("-v", "--verbose", action="store_true", help="say what was attached where")
    p.set_defaults(func=run)


def _set_rodata(spec: Any, name: str, value: str) -> None:
    """``--set NAME=VALUE``: a ``const volatile`` global, a number when it parses as one.

    :raises CliError: the object has no such read-only global.
    """
    from ..errors import NotFoundError

    try:
        number: int | str = int(value, 0)
    except ValueError:
        number = value
    try:
        spec.set_rodata(name, number)
    except NotFoundError:
        raise CliError(f"--set {name}: the object has no read-only global (const volatile) called {name!r}") from None


def _check_event_type(spec: Any, wanted: str) -> None:
    """``--event-type STRUCT`` names a struct of the object's BTF (checked
    before anything is loaded, not when the first event arrives).

    :raises CliError: the object has no BTF, or no struct of that name.
    """
    if spec.btf is None:
        raise CliError(f"--event-type {wanted}: the object has no BTF to find the struct in")
    try:
        spec.btf.find(wanted, "struct")
    except KeyError:
        raise CliError(f"--event-type {wanted}: the object's BTF has no struct {wanted!r}") from None


def _event_codec(spec: Any, size: int, wanted: str | None) -> Any:
    from ..btf.codec import codec

    btf = spec.btf
    if btf is None:
        return None
    if wanted:
        try:
            return codec(btf, btf.find(wanted, "struct"))
        except KeyError:
            raise CliError(f"--event-type {wanted}: the object's BTF has no struct {wanted!r}") from None
    structs = [t for t in btf.own_types() if type(t).__name__ == "Struct" and t.name]
    matches = [t for t in structs if t.size == size]
    if not matches:  # perf buffer samples are padded to 8 bytes with their u32 size field
        matches = [t for t in structs if size - 8 < t.size < size]
    return codec(btf, matches[0]) if len(matches) == 1 else None


def _plain(v: Any) -> Any:
    if hasattr(v, "as_dict"):
        return {k: _plain(x) for k, x in v.as_dict().items()}
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_plain(x) for x in v]
    if isinstance(v, bytes | bytearray):
        s = bytes(v).split(b"\0", 1)[0]
        try:
            text = s.decode()
            if text.isprintable() and (len(s) == len(v) or not any(bytes(v)[len(s):])):
                return text
        except UnicodeDecodeError:
            pass
        return bytes(v).hex()
    return v


def _text(v: Any) -> str:
    p = _plain(v)
    if isinstance(p, dict):
        return "{" + ", ".join(f"{k}: {_text(x)}" for k, x in p.items()) + "}"
    if isinstance(p, list):
        return "[" + ", ".join(_text(x) for x in p) + "]"
    if isinstance(p, str):
        return json.dumps(p)
    return str(p)


def _check_usage(args: argparse.Namespace) -> list[tuple[str, str]]:
    """The ``--set`` pairs, once every argument makes sense.

    :raises UsageError: a malformed ``--set``, a bad duration or command,
        options that need one another.
    """
    if args.pid_var and not args.command:
        raise UsageError("--pid-var needs -c CMD")
    if args.duration is not None and args.duration < 0:
        raise UsageError(f"-d needs a number of seconds of 0 or more, not {args.duration:g}")
    if args.command is not None:
        parse_command(args.command)
    pairs = []
    for item in args.set:
        name, eq, value = item.partition("=")
        if not eq or not name:
            raise UsageError(f"--set takes NAME=VALUE, not {item!r}")
        pairs.append((name, value))
    return pairs


def run(args: argparse.Namespace) -> int:
    """Run ``bpfmux run`` (errors are reported by the caller's guard).

    :raises UsageError: bad arguments (see :func:`_check_usage`).
    :raises CliError: no such object, no such global or event type, not privileged.
    :raises BpfmuxError: a malformed object, a rejected program, a failed attach.
    :raises OSError: a system call failed.
    """
    from ..live import LiveKernel
    from ..live.links import close_all
    from ..obj import load_object
    from ..trace.child import HeldChild
    from ..uapi import MapType

    pairs = _check_usage(args)
    if not os.path.exists(args.object):
        raise CliError(f"no such file: {args.object}")
    spec = load_object(args.object)
    for name, value in pairs:
        _set_rodata(spec, name, value)
    if args.event_type:
        _check_event_type(spec, args.event_type)
    ensure_root("bpfmux run")
    ensure_tracefs()
    links: list[Any] = []
    readers: list[Any] = []
    coll = None
    child = None
    old_term = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        try:
            child = HeldChild(args.command) if args.command else None
            if child is not None and args.pid_var:
                _set_rodata(spec, args.pid_var, str(child.pid))
            coll = LiveKernel().load(spec, programs=args.program)
            for w in coll.warnings:
                print(f"bpfmux: warning: {w}", file=sys.stderr)
            for name, prog in coll.programs.items():
                info = prog.spec.section_info if prog.spec is not None else None
                if info is None or not info.auto_attach or info.kind is None or info.kind.attach is None:
                    print(f"bpfmux: {name} ({prog.section}): loaded, not attached (its section names no attach "
                          "point)", file=sys.stderr)  # fmt: skip
                    continue
                link = prog.attach()
                links.append(link)
                if args.verbose:
                    print(f"bpfmux: {name} ({prog.section}) attached: {link!r}", file=sys.stderr)
            for mname, m in coll.maps.items():
                t = int(m.info().type)  # type: ignore[attr-defined]  # a LiveKernel collection: its maps are LiveMaps
                if t in (MapType.RINGBUF, MapType.PERF_EVENT_ARRAY):
                    readers.append(_reader(args, spec, mname, m, t))
        except BaseException:
            if child is not None:
                child.abandon()
            raise
        deadline = time.monotonic() + args.duration if args.duration is not None else None
        try:  # from here on Ctrl-C means "stop and show what was collected"
            print(f"bpfmux: {len(links)} program{'s' * (len(links) != 1)} attached from {args.object}; "
                  + (f"running {' '.join(child.argv)}" if child else "Ctrl-C to stop"), file=sys.stderr, flush=True)
            if child is not None:
                child.release()
            while True:
                if child is not None and child.poll() is not None:
                    break
                if deadline is not None and time.monotonic() >= deadline:
                    break
                if readers:
                    for r in readers:
                        r.poll(0.05)
                else:
                    time.sleep(0.05)
                sys.stdout.flush()
        except KeyboardInterrupt:
            pass
        for r in readers:
            r.consume()
        close_all(links, parallel=True)
        links = []
        if not args.no_dump:
            _dump_maps(args, coll)
        sys.stdout.flush()
        return 0
    finally:
        signal.signal(signal.SIGTERM, old_term)
        try:
            close_all(links, parallel=True)
        finally:
            for r in readers:
                r.close()
            if coll is not None:
                coll.close()
            if child is not None and child.status is None:
                child.abandon() if child._go >= 0 else child.wait()


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _reader(args: argparse.Namespace, spec: Any, name: str, m: Any, t: int) -> Any:
    from ..uapi import MapType

    cache: dict[int, Any] = {}

    def show(data: bytes, cpu: int | None = None) -> None:
        c = cache.get(len(data), 0)
        if c == 0:
            c = cache[len(data)] = _event_codec(spec, len(data), args.event_type)
        value: Any = c.decode(data) if c is not None and c.size <= len(data) else bytes(data)
        if args.json:
            rec = {"map": name, "event": _plain(value)}
            if cpu is not None:
                rec["cpu"] = cpu
            sys.stdout.write(json.dumps(rec) + "\n")
        else:
            where = f"{name}" + (f"[cpu {cpu}]" if cpu is not None else "")
            sys.stdout.write(f"{where}: {_text(value)}\n")

    if t == MapType.RINGBUF:
        return m.reader(lambda data: show(bytes(data)))
    return m.reader(lambda cpu, data: show(bytes(data), cpu))


def _dump_maps(args: argparse.Namespace, coll: Any) -> None:
    from ..uapi import MapType

    skip = {MapType.RINGBUF, MapType.PERF_EVENT_ARRAY, MapType.PROG_ARRAY, MapType.STACK_TRACE}
    for name, m in coll.maps.items():
        t = int(m.info().type)
        if t in skip or name.startswith(".rodata") or name == ".kconfig":
            continue
        # entry by entry: a map of millions of entries is never held as a list
        sys.stdout.write(json.dumps({"map": name})[:-1] + ', "items": [' if args.json else f"\n{name}:\n")
        n = 0
        try:
            for k, v in m.items():
                if args.json:
                    sys.stdout.write((", " if n else "") + json.dumps([_plain(k), _plain(v)]))
                elif isinstance(v, list) and v and all(isinstance(x, int) for x in v) and t in (
                        MapType.PERCPU_ARRAY, MapType.PERCPU_HASH, MapType.LRU_PERCPU_HASH):
                    sys.stdout.write(f"  {_text(k)}: {sum(v)} (per CPU: {', '.join(str(x) for x in v)})\n")
                else:
                    sys.stdout.write(f"  {_text(k)}: {_text(v)}\n")
                n += 1
        except Exception as e:
            print(f"bpfmux: cannot dump map {name} (after {n} entries): {e}", file=sys.stderr)
        if args.json:
            sys.stdout.write("]}\n")
        elif not n:
            sys.stdout.write("  (empty)\n")

"""``bpfmux trace``: count, time, decode or profile probes given in bpftrace's spelling."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from typing import Any

from ._common import (
    CliError,
    UsageError,
    console,
    ensure_root,
    ensure_tracefs,
    parse_command,
    parse_duration,
    user_input,
)

DESCRIPTION = """\
Attach generated BPF programs (no compiler needed) to every probe given and
report what they saw. Each glob becomes one multi-attach with the best
mechanism the kernel has; -v says which.

probe specs (bpftrace's spelling; globs allowed in names):
  tracepoint:SUBSYS:NAME     t:   e.g. tracepoint:syscalls:sys_enter_*  (all syscalls: one
                                  raw tracepoint with an in-kernel filter)
  rawtracepoint:NAME         rt:  e.g. rawtracepoint:sched_switch
  uprobe:PATH:FUNC           u:   e.g. uprobe:libc:str* (one uprobe_multi link)
  uretprobe:PATH:FUNC        ur:
  kprobe:FUNC / kretprobe:FUNC    k: / kr:   e.g. kprobe:vfs_*
  fentry:FUNC / fexit:FUNC        f: / fr:
  profile:hz:N               p:   e.g. profile:hz:99 (also s, ms, us)
  software:EVENT[:N]         s:   e.g. software:page-faults:100

modes:
  --count     hits per probe (default); split per process with --by comm|pid
  --latency   entry-to-return time per function as log2 histograms
  --args      one line per hit with its arguments decoded (BTF / tracepoint format)
  --stacks    kernel and user stacks, aggregated and symbolized

output: a live table refreshed in place on a terminal; plain text otherwise;
--json for one JSON object per line; --prometheus PORT serves /metrics.
"""

EPILOG = """\
examples:
  bpfmux trace 'tracepoint:syscalls:sys_enter_*'            live table of syscall counts
  bpfmux trace 'tracepoint:syscalls:sys_enter_*' --by comm  ... per command
  bpfmux trace 't:sched:*' -d 5                            scheduler events for 5 s
  bpfmux trace 'uprobe:libc:str*' --latency -c 'ls -l /'   libc str* latency of one command
  bpfmux trace 't:syscalls:sys_enter_openat' --args        each openat with its file name
  bpfmux trace profile:hz:99 --stacks -d 10                CPU profile with symbolized stacks
  bpfmux trace 't:syscalls:sys_enter_*' --prometheus 9464  counts for Prometheus scraping
  bpfmux trace 't:syscalls:sys_enter_*' -d 2 --json        machine-readable counts
  bpfmux trace 'k:bpf_fentry_test*' --emulate 'bpf_fentry_test1(1)*3'
                                                           the same tracer on the emulated kernel, no root
  bpfmux trace -l 'tracepoint:sched:*'                     list probes (as bpftrace -l does; -v: fields)

exit status: 0 after results were printed (also after Ctrl-C once tracing),
1 on an error (one line; --debug adds the traceback), 2 on bad usage (a
malformed probe spec, duration or option), 130 on Ctrl-C before tracing began.
Needs root (CAP_BPF and CAP_PERFMON), except with --emulate.
"""


def register(sub: Any) -> None:
    """Add ``trace`` to the subcommand parsers."""
    p = sub.add_parser("trace", help="count/time/decode probes (bpftrace-style specs, generated programs)",
                       description=DESCRIPTION, epilog=EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("probes", nargs="*", metavar="PROBE", help="probe spec(s), see above (with -l: a pattern)")
    p.add_argument("-l", "--list", action="store_true",
                   help="list the probes matching PROBE (a glob such as 'tracepoint:syscalls:*'; -v adds tracepoint "
                        "fields) instead of tracing")  # fmt: skip
    m = p.add_mutually_exclusive_group()
    m.add_argument("--count", dest="mode", action="store_const", const="count", help="count hits (default)")
    m.add_argument("--latency", dest="mode", action="store_const", const="latency",
                   help="log2 histograms of entry-to-return time")  # fmt: skip
    m.add_argument("--args", dest="mode", action="store_const", const="args", help="print each hit with its arguments")
    m.add_argument("--stacks", dest="mode", action="store_const", const="stacks", help="aggregate symbolized stacks")
    p.set_defaults(mode="count")
    p.add_argument("--by", choices=("comm", "pid"), help="split counts/histograms per command name or process id")
    p.add_argument("-p", "--pid", type=int, help="only this process id")
    p.add_argument("--comm", help="only processes with this command name (as in /proc/PID/comm)")
    p.add_argument("--min-latency", metavar="DURATION", help="--latency: ignore faster calls (e.g. 10us, 1ms)")
    p.add_argument("-d", "--duration", type=float, metavar="SECONDS", help="stop after SECONDS (default: Ctrl-C)")
    p.add_argument("-c", "--command", metavar="CMD", help="run CMD, trace only it, stop when it exits")
    p.add_argument("-i", "--interval", type=float, metavar="SECONDS",
                   help="refresh/print every SECONDS (terminal default 1; otherwise only at the end)")  # fmt: skip
    p.add_argument("--top", type=int, metavar="N", help="show the N busiest rows (terminal default: what fits)")
    p.add_argument("--json", action="store_true", help="JSON lines instead of tables")
    p.add_argument("--plain", action="store_true", help="plain text even on a terminal (no live table)")
    p.add_argument("--prometheus", type=int, metavar="PORT", help="serve counts at http://127.0.0.1:PORT/metrics")
    p.add_argument("--prometheus-addr", default="127.0.0.1", metavar="ADDR", help="address to bind (default 127.0.0.1)")
    p.add_argument("--emulate", metavar="WORKLOAD",
                   help="trace the emulated kernel (no root) driven by WORKLOAD: a call-stream file (JSON lines, "
                        "'-' for stdin) or a workload spec such as 'sys:openat*3,user:libc:strlen*2' "
                        "(see bpfmux emulate --help)")  # fmt: skip
    p.add_argument("--policy", default="clone", choices=("clone", "filter", "per-function"),
                   help="--emulate: trampoline policy of the emulated kernel (default clone)")  # fmt: skip
    p.add_argument("-v", "--verbose", action="store_true", help="say which attach mechanism each probe group used")
    p.set_defaults(func=run)


def _check_usage(args: argparse.Namespace) -> tuple[list[Any], int]:
    """The probe specs and ``--min-latency`` in ns, once every argument makes sense.

    :raises UsageError: a malformed probe spec or duration, or options that
        contradict each other.
    """
    from ..trace import parse_probes

    if not args.probes:
        raise UsageError("give at least one probe spec, e.g. 'tracepoint:syscalls:sys_enter_*' (-l lists them)")
    with user_input():
        specs = parse_probes(args.probes)
    with user_input("--min-latency"):
        min_latency = parse_duration(args.min_latency) if args.min_latency else 0
    if args.min_latency and args.mode != "latency":
        raise UsageError("--min-latency only applies to --latency")
    if args.by and args.mode not in ("count", "latency"):
        raise UsageError("--by applies to --count and --latency")
    if args.pid is not None and args.command:
        raise UsageError("give either -p PID or -c CMD, not both")
    if args.pid is not None and args.pid <= 0:
        raise UsageError(f"-p needs a positive process id, not {args.pid}")
    if args.comm is not None and not 0 < len(args.comm.encode()) <= 15:
        raise UsageError("--comm takes a command name of 1 to 15 bytes (as in /proc/PID/comm)")
    if args.duration is not None and args.duration < 0:
        raise UsageError(f"-d needs a number of seconds of 0 or more, not {args.duration:g}")
    if args.interval is not None and args.interval < 0:
        raise UsageError(f"-i needs a number of seconds of 0 or more, not {args.interval:g}")
    if args.top is not None and args.top < 0:
        raise UsageError(f"--top needs a number of rows, not {args.top}")
    if args.prometheus is not None and not 0 <= args.prometheus <= 65535:
        raise UsageError(f"--prometheus needs a TCP port (0 to 65535), not {args.prometheus}")
    if args.command is not None:
        parse_command(args.command)
    if args.emulate is not None and args.command is not None:
        raise UsageError("--emulate traces the emulated kernel's workload; -c runs a real command (give one, not both)")
    return specs, min_latency


def run(args: argparse.Namespace) -> int:
    """Run ``bpfmux trace`` (errors are reported by the caller's guard).

    :raises UsageError: bad arguments (see :func:`_check_usage`).
    :raises CliError: not privileged, no tracefs, no such process.
    :raises BpfmuxError: a probe matches nothing, is not supported, or fails to attach.
    :raises OSError: a system call failed.
    """
    from ..trace import TraceOptions, Tracer

    if args.list:
        return _list(args)
    specs, min_latency = _check_usage(args)
    opts = TraceOptions(mode=args.mode, by=args.by, pid=args.pid, comm=args.comm, min_latency=min_latency)
    if args.emulate is not None:
        return _run_emulated(args, specs, opts)
    if args.pid is not None and not os.path.exists(f"/proc/{args.pid}"):
        raise CliError(f"no process with pid {args.pid}")
    ensure_root("bpfmux trace")
    ensure_tracefs()
    child = None
    old_term = signal.signal(signal.SIGTERM, _raise_interrupt)
    old_int = signal.signal(signal.SIGINT, _raise_interrupt)  # also when started as a background job (SIGINT ignored)
    try:
        if args.command:
            from ..trace.child import HeldChild

            child = HeldChild(args.command)
            opts.pid = child.pid
            opts.skip_comm = child.comm  # what the helper does before its exec is not the command's
        try:
            tracer = Tracer(specs, opts)
            tracer.start()
        except BaseException:
            if child is not None:
                child.abandon()
            raise
        with tracer:
            nprobes = len(tracer.probes)
            if args.verbose:
                for line in tracer.mechanisms:
                    print(f"bpfmux: {line}", file=sys.stderr)
            how = f"running {' '.join(child.argv)}" if child is not None else "Ctrl-C to stop"

            def announce() -> None:
                print(f"bpfmux: tracing {nprobes} probe{'s' * (nprobes != 1)} "
                      f"(attached in {tracer.attach_seconds * 1000:.0f} ms); {how}", file=sys.stderr, flush=True)  # fmt: skip
                if child is not None:
                    child.release()

            return _loop(args, tracer, child, announce)
    finally:
        signal.signal(signal.SIGTERM, old_term)
        signal.signal(signal.SIGINT, old_int)


def _list(args: argparse.Namespace) -> int:
    """``-l [PATTERN]``: the probes of this machine matching the pattern, sorted (bpftrace's listing)."""
    from ..trace.listing import list_probes

    if len(args.probes) > 1:
        raise UsageError("-l takes one pattern, e.g. -l 'tracepoint:sched:*'")
    with user_input("-l"):
        rows = list_probes(args.probes[0] if args.probes else "*:*", verbose=args.verbose)
    for name, details in rows:
        sys.stdout.write(name + "\n")
        for d in details:
            sys.stdout.write(f"    {d}\n")
    return 0


def _run_emulated(args: argparse.Namespace, specs: list[Any], opts: Any) -> int:
    """``--emulate``: the same tracer on the emulated kernel, driven by a workload, then the results.

    :raises UsageError: a malformed workload spec.
    :raises ParseError: a malformed call-stream file.
    :raises BpfmuxError: a probe matches nothing, or a workload event names what the emulated kernel lacks.
    """
    from ..emu import Emulator
    from ..emu.kernel.replay import apply, load_events
    from ..trace import Tracer

    with user_input("--emulate"):
        events = load_events(args.emulate)
    with Emulator(policy=args.policy) as emu, Tracer(specs, opts, kernel=emu) as tracer:
        if args.verbose:
            for line in tracer.mechanisms:
                print(f"bpfmux: {line}", file=sys.stderr)
        start = tracer.snapshot()
        ran = apply(emu, events)
        print(f"bpfmux: emulated kernel: {len(tracer.probes)} probe{'s' * (len(tracer.probes) != 1)}, "
              f"{ran} workload event{'s' * (ran != 1)}", file=sys.stderr, flush=True)
        if args.mode == "args":
            _stream_args(args, tracer, lambda: True)
            return 0
        _print_results(args, tracer, tracer.snapshot(), start, periodic=False)
    return 0


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _loop(args: argparse.Namespace, tracer: Any, child: Any, announce: Any) -> int:
    tty = sys.stdout.isatty() and not args.json and not args.plain
    interval = args.interval if args.interval is not None else (1.0 if tty else None)
    deadline = time.monotonic() + args.duration if args.duration is not None else None
    server = None
    if args.prometheus is not None:
        from ..trace.prom import MetricsServer
        from ..trace.report import prometheus_text

        server = MetricsServer(args.prometheus, lambda: prometheus_text(tracer.snapshot(), tracer.probes,
                                                                        tracer.options.by), args.prometheus_addr)  # fmt: skip
        print(f"bpfmux: serving metrics at {server.url}", file=sys.stderr, flush=True)
    first = tracer.snapshot()
    state = {"prev": first, "start": first}

    def finished() -> bool:
        if child is not None and child.poll() is not None:
            return True
        return deadline is not None and time.monotonic() >= deadline

    stacks = args.mode == "stacks"
    last_seen = [0.0]

    def remember_processes() -> None:
        """--stacks: keep the memory maps of processes seen in stacks, while they live."""
        if child is not None:
            _symbolizer().remember(child.pid, refresh=True)
        now = time.monotonic()
        if now - last_seen[0] >= 0.25:
            last_seen[0] = now
            for key in tracer.snapshot().stacks:
                _symbolizer().remember(key[3])

    def wait(seconds: float | None) -> None:
        """Sleep until the next refresh, the deadline or the child's exit."""
        end = time.monotonic() + seconds if seconds else None
        while not finished():
            if stacks:
                remember_processes()
            now = time.monotonic()
            if end is not None and now >= end:
                return
            step = 0.05 if child is not None else 0.2
            if end is not None:
                step = min(step, end - now)
            if deadline is not None:
                step = min(step, max(0.0, deadline - now))
            time.sleep(max(step, 0.001))

    live = None
    try:
        try:  # Ctrl-C from the moment the probes are announced means "stop and print the results"
            announce()
            if args.mode == "args":
                _stream_args(args, tracer, finished)
                return 0
            if tty:
                live = _LiveView(args, tracer)
            while not finished():
                wait(interval)
                snap = tracer.snapshot()
                if live is not None:
                    live.update(snap, state["prev"], state["start"])
                elif interval is not None:
                    _print_results(args, tracer, snap, state["prev"], periodic=True)
                state["prev"] = snap
        except KeyboardInterrupt:
            if args.mode == "args":
                _stream_args(args, tracer, lambda: True)  # print what is already in the ring buffer
                return 0
        finally:
            if live is not None:
                live.stop()
        if child is not None:
            child.wait()
        snap = tracer.snapshot()
        _print_results(args, tracer, snap, state["start"], periodic=False)
        return 0
    finally:
        if server is not None:
            server.close()


class _LiveView:
    """The rich live table, refreshed in place."""

    def __init__(self, args: argparse.Namespace, tracer: Any) -> None:
        from rich.live import Live

        self.args = args
        self.tracer = tracer
        self.console = console()
        self.started = time.monotonic()
        self.live = Live(console=self.console, auto_refresh=False, transient=True)
        self.live.start()

    def update(self, snap: Any, prev: Any, start: Any) -> None:
        from rich.text import Text

        from ..trace.report import count_rows, rich_table

        args, tracer = self.args, self.tracer
        elapsed = time.monotonic() - self.started
        limit = args.top or max(5, self.console.size.height - 8)
        if args.mode == "count":
            rows = count_rows(snap, prev, tracer.probes)
            total = sum(r.total for r in rows)
            shown = rows[:limit]
            cap = f"{len(rows)} rows, {total:,} hits in {elapsed:.0f}s; Ctrl-C to stop"
            self.live.update(rich_table(shown, args.by, title=f"bpfmux trace: {_title(args)}", caption=cap),
                             refresh=True)  # fmt: skip
        elif args.mode == "latency":
            snap2 = _hist_as_counts(snap)
            prev2 = _hist_as_counts(prev)
            rows = count_rows(snap2, prev2, tracer.probes)[:limit]
            cap = f"calls per function in {elapsed:.0f}s; histograms are printed at the end; Ctrl-C to stop"
            self.live.update(rich_table(rows, args.by, title=f"bpfmux trace --latency: {_title(args)}", caption=cap),
                             refresh=True)  # fmt: skip
        else:
            n = sum(snap.stacks.values())
            self.live.update(Text(f"bpfmux trace --stacks: {n:,} samples in {len(snap.stacks)} distinct stacks "
                                  f"after {elapsed:.0f}s; Ctrl-C to stop and print them"), refresh=True)  # fmt: skip
        for key in snap.stacks:
            _symbolizer().remember(key[3])

    def stop(self) -> None:
        self.live.stop()


def _title(args: argparse.Namespace) -> str:
    t = " ".join(args.probes)
    return t if len(t) < 70 else t[:67] + "..."


def _hist_as_counts(snap: Any) -> Any:
    from ..trace.engine import Snapshot

    s = Snapshot(snap.time)
    s.counts = {k: sum(h.values()) for k, h in snap.hists.items()}
    return s


_SYM: Any = None


def _symbolizer() -> Any:
    global _SYM
    if _SYM is None:
        from ..trace.symbolize import Symbolizer

        _SYM = Symbolizer()
    return _SYM


def _print_results(args: argparse.Namespace, tracer: Any, snap: Any, since: Any, *, periodic: bool) -> None:
    from ..trace.report import count_rows, count_text, latency_records, latency_text

    by = tracer.options.by
    out = sys.stdout
    if args.mode == "count":
        rows = count_rows(snap, since, tracer.probes, args.top)
        if args.json:
            for r in rows:
                d = r.as_dict(by)
                if periodic:
                    d["time"] = round(time.time(), 3)
                out.write(json.dumps(d) + "\n")
        else:  # busiest last, as bpftrace prints: the busiest rows stay on screen after Ctrl-C
            if periodic:
                out.write(time.strftime("%H:%M:%S") + "\n")
            out.write(count_text(rows[::-1], by) + "\n")
            if not rows:
                out.write("(no hits)\n")
            if periodic:
                out.write("\n")
    elif args.mode == "latency":
        if args.json:
            for rec in latency_records(snap, tracer.probes, by):
                out.write(json.dumps(rec) + "\n")
        else:
            text = latency_text(snap, tracer.probes, by, busiest_last=True)
            out.write((text or "(no calls)") + "\n")
    elif args.mode == "stacks":
        _print_stacks(args, tracer, snap)
    out.flush()


def _print_stacks(args: argparse.Namespace, tracer: Any, snap: Any) -> None:
    sym = _symbolizer()
    items = sorted(snap.stacks.items(), key=lambda kv: -kv[1])
    if args.top:
        items = items[: args.top]
    if not args.json:
        items = items[::-1]  # busiest last, as bpftrace prints
    out = sys.stdout
    if not items:
        out.write("(no samples)\n")
    for (idx, kst, ust, pid, comm), n in items:
        k, u = sym.symbolize(tracer, kst, ust, pid)
        if args.json:
            out.write(json.dumps({"probe": tracer.probes[idx].name, "pid": pid, "comm": comm, "count": n,
                                  "kernel_stack": k, "user_stack": u}) + "\n")  # fmt: skip
            continue
        out.write(f"@[{tracer.probes[idx].name}, {comm} ({pid})]: {n}\n")
        for f in k:
            out.write(f"    {f}\n")
        if k and u:
            out.write("    --\n")
        for f in u:
            out.write(f"    {f}\n")
        if not k and not u:
            out.write("    [no stack]\n")
        out.write("\n")


def _stream_args(args: argparse.Namespace, tracer: Any, finished: Any) -> None:
    from ..trace.decode import decode_event

    kind_of = tracer.kind_of()
    out = sys.stdout
    count = [0]

    def on_event(raw: Any) -> None:
        ev = decode_event(bytes(raw), tracer.probes, kind_of)
        out.write((json.dumps(ev.as_dict()) if args.json else ev.line()) + "\n")
        count[0] += 1

    ring = tracer.events(on_event)
    try:
        while not finished():
            ring.poll(0.1)
            out.flush()
    except KeyboardInterrupt:
        pass
    ring.consume()
    out.flush()
    drops = tracer.snapshot().drops
    print(f"bpfmux: {count[0]} events" + (f", {drops} lost (ring buffer full)" if drops else ""), file=sys.stderr)

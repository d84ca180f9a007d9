"""Running a compiled script on a kernel, as bpftrace runs it.

:func:`compile_script` parses, resolves the probes on a kernel, checks and
generates the programs (:class:`Script`). :class:`Session` creates the maps,
loads the programs, prints ``Attaching N probes...``, runs ``BEGIN``,
attaches every probe through the kernel contract (:mod:`bpfmux.api`; the
planner's mechanism per group), delivers the output events in order, fires
``interval`` probes, and at the end detaches, runs ``END`` and prints the
maps. ``BEGIN``, ``END`` and ``interval`` bodies are raw tracepoint programs
run with ``BPF_PROG_TEST_RUN`` by bpfmux itself, on either kernel.
"""

from __future__ import annotations

import os
import select
import sys
import time
from collections.abc import Hashable
from typing import IO, Any

from .. import api
from ..errors import BpfError, BpfmuxError, NotFoundError, ParseError
from ..record import Value
from ..trace.plan import Mechanism
from ..uapi import MapType
from . import ast as A
from .codegen import CompiledProgram, compile_context, map_ref
from .errors import Source
from .kerneltypes import LazyBtf
from .output import Printer, format_printf
from .parser import Parser
from .probes import Resolution, resolve
from .semantic import Checked, Env, analyze

__all__ = ["Options", "Script", "Session", "compile_script"]

_RINGBUF_SIZE = 1 << 22
_SOFTWARE = {"cpu-clock": "cpu_clock", "cpu": "cpu_clock", "task-clock": "task_clock", "page-faults": "page_faults",
             "faults": "page_faults", "context-switches": "context_switches", "cs": "context_switches",
             "cpu-migrations": "cpu_migrations", "minor-faults": "page_faults_min",
             "major-faults": "page_faults_maj", "alignment-faults": "alignment_faults",
             "emulation-faults": "emulation_faults", "dummy": "dummy", "bpf-output": "bpf_output"}  # fmt: skip


class Options(Value):
    """What the command line (or a test) sets.

    :ivar params: positional parameters.
    :ivar unsafe: allow ``system()`` and ``signal()``.
    :ivar json: ``-f json``.
    :ivar quiet: ``-q`` (no "Attaching" line).
    :ivar pid: ``-p PID``: uprobes only in that process.
    :ivar child_pid: ``-c CMD``'s pid (``cpid``), 0 without ``-c``.
    :ivar has_child: ``-c`` given.
    :ivar helper_check: ``-k``/``-kk`` level.
    """

    __slots__ = (
        "params",
        "unsafe",
        "json",
        "quiet",
        "pid",
        "child_pid",
        "has_child",
        "helper_check",
        "strlen",
        "map_keys_max",
    )

    params: list[str]
    unsafe: bool
    json: bool
    quiet: bool
    pid: int | None
    child_pid: int
    has_child: bool
    helper_check: int
    strlen: int
    map_keys_max: int

    def __init__(
        self,
        params: list[str] | None = None,
        unsafe: bool = False,
        json: bool = False,
        quiet: bool = False,
        pid: int | None = None,
        child_pid: int = 0,
        has_child: bool = False,
        helper_check: int = 0,
        strlen: int = 64,
        map_keys_max: int = 4096,
    ) -> None:
        self.params = [] if params is None else params
        self.unsafe = unsafe
        self.json = json
        self.quiet = quiet
        self.pid = pid
        self.child_pid = child_pid
        self.has_child = has_child
        self.helper_check = helper_check
        self.strlen = strlen
        self.map_keys_max = map_keys_max


class Script(Value):
    """A script compiled for one kernel.

    :ivar program: the syntax tree.
    :ivar resolution: the probes its attach points expanded to.
    :ivar checked: types, maps and output actions.
    :ivar programs: one generated program per context.
    """

    __slots__ = ("source", "program", "resolution", "checked", "programs")

    source: Source
    program: A.Program
    resolution: Resolution
    checked: Checked
    programs: list[CompiledProgram]

    def __init__(
        self,
        source: Source,
        program: A.Program,
        resolution: Resolution,
        checked: Checked,
        programs: list[CompiledProgram],
    ) -> None:
        self.source = source
        self.program = program
        self.resolution = resolution
        self.checked = checked
        self.programs = programs

    @property
    def warnings(self) -> list[str]:
        """What resolving the probes warned about."""
        return self.resolution.warnings

    @property
    def num_probes(self) -> int:
        """bpftrace's probe count (``Attaching N probes...``)."""
        return self.resolution.num_probes


def _kernel_now(kernel: Any) -> int:
    vm = getattr(kernel, "vm", None)
    if vm is not None:
        return int(vm.clock.monotonic())
    return time.monotonic_ns()


def compile_script(text: str, kernel: Any, options: Options | None = None, *, name: str = "stdin") -> Script:
    """Parse, resolve, check and generate ``text`` for ``kernel`` (any
    :class:`bpfmux.api.Kernel`).

    :raises ScriptError: the script is not valid, or names probes that do not exist.
    :raises NotSupportedError: the kernel lacks what a probe needs.
    """
    opts = options or Options()
    source = Source(text, name)
    parser = Parser(source)
    program = parser.program()
    res = resolve(program, kernel, params=opts.params, source=source, pid=opts.pid)
    env = Env(btf=LazyBtf(lambda: getattr(kernel, "btf", None)), params=list(opts.params), unsafe=opts.unsafe,
              has_child=opts.has_child, child_pid=opts.child_pid, strlen=opts.strlen,
              map_keys_max=opts.map_keys_max)  # fmt: skip
    checked = analyze(program, res, env, source)
    start = _kernel_now(kernel)
    live = getattr(kernel, "kind", "live") == "live"
    programs = []
    for i, info in enumerate(checked.contexts):
        if info.ctx.how == "skipped":
            continue
        uprobe = info.ctx.how in (Mechanism.UPROBE, Mechanism.UPROBE_MULTI)
        tgid = opts.pid if uprobe and opts.pid and info.ctx.how == Mechanism.UPROBE else None
        programs.append(compile_context(checked, info, i, start_ns=start, tgid_filter=tgid, may_goto=live,
                                        helper_check=opts.helper_check, split_reads=live))  # fmt: skip
    return Script(source, program, res, checked, programs)


class Session:
    """A script running on a kernel (see the module docstring).

    :param out: where output goes (``-o FILE``, else stdout).
    :param maps_out: where the ``\\n\\n`` before the exit map dump goes
        (bpftrace writes it to stdout even with ``-o``).
    """

    def __init__(self, script: Script, kernel: Any, options: Options | None = None, *, out: IO[str] | None = None,
                 maps_out: IO[str] | None = None) -> None:  # fmt: skip
        self.script = script
        self.kernel = kernel
        self.options = options or Options()
        self.out = out if out is not None else sys.stdout
        self.maps_out = maps_out if maps_out is not None else sys.stdout
        self.maps: dict[str, api.Map] = {}
        self._functions: frozenset[str] | None = None
        self.loaded: list[tuple[CompiledProgram, api.Program]] = []
        self.links: list[Any] = []
        self.exit_requested = False
        self.in_end = False
        self.lost_reported = 0
        self.printer = Printer(self.out, names=script.resolution.names, funcs=self._funcs(),
                               json_mode=self.options.json, stack=self._stack,
                               ncpus=self._ncpus())  # fmt: skip
        self._ring: Any = None
        self._intervals: list[tuple[float, int, api.Program]] = []
        self._closed = False
        self.mechanisms: list[str] = []

    # -- setup ---------------------------------------------------------------------------------

    def _funcs(self) -> dict[int, str]:
        out = {}
        for cs in self.script.resolution.contexts:
            for c in cs:
                for t in c.targets:
                    out[t.idx] = str(t.info.get("function", t.name.rsplit(":", 1)[-1]))
        return out

    def _ncpus(self) -> int:
        vm = getattr(self.kernel, "vm", None)
        if vm is not None:
            return int(getattr(vm, "ncpus", 1))
        from ..host.cpus import possible_cpus

        return possible_cpus()

    def _traceable(self) -> frozenset[str]:
        """The kernel functions probes can attach to (read once)."""
        if self._functions is None:
            try:
                self._functions = frozenset(self.kernel.function_names("*"))
            except (NotFoundError, BpfmuxError, OSError):
                self._functions = frozenset()
        return self._functions

    def _stack(self, ref: str, stackid: int) -> list[int]:
        m = self.maps.get(ref)
        if m is None:
            return []
        try:
            raw = m.lookup_raw(stackid)
        except (BpfError, NotFoundError, BpfmuxError):
            return []
        if raw is None:
            return []
        ips = [int.from_bytes(raw[i:i + 8], "little") for i in range(0, len(raw), 8)]
        out = []
        for ip in ips:
            if ip == 0:
                break
            out.append(ip)
        if ref.startswith("stack:k") and out:
            out = self.printer.symbolizer.strip_bpf_frames(out)
        return out

    def create_maps(self) -> None:
        """Create every map the programs use.

        :raises BpfError: the kernel refused one.
        """
        k = self.kernel
        checked = self.script.checked
        scratch = max([p.scratch for p in self.script.programs] + [16])
        scratch = (scratch + 7) & ~7

        def mk(ref: str, t: MapType, ks: int, vs: int, n: int, name: str) -> None:
            self.maps[ref] = k.create_map(t, ks, vs, n, name=name[:15])

        mk("scratch", MapType.PERCPU_ARRAY, 4, scratch, 1, "bt_scratch")
        mk("events", MapType.RINGBUF, 0, 0, _RINGBUF_SIZE, "bt_events")
        mk("drops", MapType.PERCPU_ARRAY, 4, 8, 1, "bt_drops")
        for name, info in checked.maps.items():
            t = MapType.PERCPU_ARRAY if info.array else MapType.PERCPU_HASH if info.percpu else MapType.HASH
            entries = self.options.map_keys_max if info.keyed else 1
            mk(map_ref(name), t, info.key_size, info.value_size, entries, _map_name(name))
        stacks = sorted({s for p in self.script.programs for s in p.stacks})
        for ref in stacks:
            limit = int(ref.rsplit(":", 1)[1])
            mk(ref, MapType.STACK_TRACE, 4, 8 * limit, 4096, f"bt_stack_{ref[6]}")
        for p in self.script.programs:
            if p.sysidx_ref:
                mk(p.sysidx_ref, MapType.ARRAY, 4, 4, 1024, "bt_sysidx")
                m = self.maps[p.sysidx_ref]
                for nr, v in p.sysidx.items():
                    if 0 <= nr < 1024:
                        m[nr] = v.to_bytes(4, "little")

    def load(self) -> None:
        """Load every program (maps first).

        :raises BpfError: the verifier refused a program (its log attached).
        """
        values: dict[Hashable, int] = {ref: m.fd for ref, m in self.maps.items()}
        for p in self.script.programs:
            ctx = p.info.ctx
            target = None
            if ctx.how in (Mechanism.FENTRY, Mechanism.FEXIT) and ctx.group is not None:
                target = ctx.group.targets[0]
            insns = p.program.resolve(values)
            prog = self.kernel.load_program(insns, p.prog_type, name=p.name, attach_type=p.attach_type,
                                            attach_target=target)  # fmt: skip
            self.loaded.append((p, prog))

    def start(self) -> None:
        """Maps, programs, the "Attaching" line, ``BEGIN``, then every probe attached.

        :raises BpfError: the kernel refused a map, a program or an attachment.
        :raises NotSupportedError: a probe kind the kernel lacks.
        """
        try:
            self.create_maps()
            self.load()
            events: Any = self.maps["events"]  # a ring buffer map: both kernels' have reader()
            self._ring = events.reader(self._on_event)
            if not self.options.quiet:
                n = self.script.num_probes
                if self.options.json:
                    self.out.write(f'{{"type": "attached_probes", "data": {{"probes": {n}}}}}\n')
                else:
                    self.out.write(f"Attaching {n} probe{'s' if n != 1 else ''}...\n")
                self.out.flush()
            for p, prog in self.loaded:
                if p.info.ctx.provider == "BEGIN":
                    self._test_run(prog)
            for p, prog in self.loaded:  # BEGIN's output shows once every probe is attached, as in bpftrace
                self._attach(p, prog)
            self.drain()
        except BaseException:
            self.close()
            raise

    def _test_run(self, prog: api.Program) -> None:
        prog.test_run(bytes(8))

    def _attach(self, p: CompiledProgram, prog: api.Program) -> None:
        ctx = p.info.ctx
        how = ctx.how
        g = ctx.group
        cookies = [t.idx for t in ctx.targets]
        pid = self.options.pid if self.options.pid else -1
        if how == "special":
            if ctx.provider == "interval":
                period = ctx.attach.period_ns / 1e9
                self._intervals.append((time.monotonic() + period, ctx.attach.period_ns, prog))
            return
        assert g is not None or how == "hardware"
        if how in (Mechanism.SYS_ENTER, Mechanism.SYS_EXIT):
            self.links.append(prog.attach(str(how)))
            self.mechanisms.append(f"{ctx.attach.text}: 1 raw tracepoint ({how}) filtered in the kernel on "
                                   f"{len(ctx.targets)} syscall(s)")  # fmt: skip
        elif how == Mechanism.RAW_TP:
            assert g is not None
            for t, c in zip(g.targets, cookies, strict=True):
                self.links.append(prog.attach(t.rsplit(":", 1)[-1], cookie=c))
            self.mechanisms.append(f"{ctx.attach.text}: {len(g.targets)} raw tracepoint link(s)")
        elif how == Mechanism.TRACEPOINT:
            assert g is not None
            self.links.append(prog.attach_many(g.targets, cookies))
            self.mechanisms.append(f"{ctx.attach.text}: {len(g.targets)} tracepoint perf link(s)")
        elif how in (Mechanism.UPROBE_MULTI, Mechanism.UPROBE):
            assert g is not None
            self.links.append(prog.attach_many(g.targets, cookies, retprobe=ctx.retprobe, pid=pid))
            kind = "uprobe_multi" if how == Mechanism.UPROBE_MULTI else "perf-event uprobes"
            self.mechanisms.append(f"{ctx.attach.text}: {kind}, {len(g.targets)} function(s)")
        elif how in (Mechanism.KPROBE_MULTI, Mechanism.KPROBE):
            assert g is not None
            targets = list(g.targets)
            known = self._traceable() if not ctx.lone else frozenset()
            if known:  # in a list or a glob, a function that cannot be probed is skipped, as in bpftrace
                keep = [i for i, t in enumerate(targets) if t.partition("+")[0] in known]
                for i in sorted(set(range(len(targets))) - set(keep)):
                    print(f"WARNING: could not attach probe {ctx.provider}:{targets[i]}, skipping.", file=sys.stderr)
                targets, cookies = [targets[i] for i in keep], [cookies[i] for i in keep]
                if not targets:
                    return
            self.links.append(prog.attach_many(targets, cookies, retprobe=ctx.retprobe))
            kind = "kprobe_multi" if how == Mechanism.KPROBE_MULTI else "perf-event kprobes"
            self.mechanisms.append(f"{ctx.attach.text}: {kind}, {len(targets)} function(s)")
        elif how in (Mechanism.FENTRY, Mechanism.FEXIT):
            self.links.append(prog.attach())
            self.mechanisms.append(f"{ctx.attach.text}: {how} trampoline")
        elif how == Mechanism.SAMPLING:
            assert g is not None
            s = g.spec
            if s.kind == "profile":
                if s.name == "hz":
                    link = prog.attach("cpu_clock", sample_freq=s.rate, pid=pid)
                else:
                    unit = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000}[s.name]
                    link = prog.attach("cpu_clock", sample_period=s.rate * unit, pid=pid)
            else:
                link = prog.attach(_SOFTWARE.get(s.name, s.name), sample_period=s.rate, pid=pid)
            self.links.append(link)
            self.mechanisms.append(f"{ctx.attach.text}: perf_event sampling")
        elif how == "hardware":
            from .probes import _HARDWARE

            event = _HARDWARE[ctx.attach.parts[0]]
            self.links.append(prog.attach(event, sample_period=ctx.attach.period_ns, pid=pid))
            self.mechanisms.append(f"{ctx.attach.text}: perf_event sampling (hardware)")

    # -- running -------------------------------------------------------------------------------

    @property
    def next_interval(self) -> float | None:
        """``time.monotonic()`` of the next ``interval`` probe (``None``: none)."""
        return min((t for t, _, _ in self._intervals), default=None)

    def poll(self, timeout: float, wake_fd: int | None = None) -> None:
        """Deliver events for up to ``timeout`` seconds; fire due ``interval`` probes.

        :param wake_fd: also return as soon as this fd is readable (the command line passes the read end
            of its signal wake-up pipe, so Ctrl-C ends the wait at once instead of after ``timeout``);
            what it holds is read and discarded.
        """
        if self._ring is None:
            return
        now = time.monotonic()
        nxt = self.next_interval
        if nxt is not None:
            timeout = max(0.0, min(timeout, nxt - now))
        fileno = getattr(self._ring, "fileno", None)
        if wake_fd is None or fileno is None:
            self._ring.poll(timeout)
        else:
            if self._ring.available() <= 0:
                ready, _, _ = select.select([fileno(), wake_fd], [], [], timeout)
                if wake_fd in ready:
                    _drain_fd(wake_fd)
            self._ring.consume()
        self.fire_intervals()

    def fire_intervals(self, force: bool = False) -> None:
        """Run every ``interval`` probe that is due (all of them with ``force``)."""
        now = time.monotonic()
        for i, (due, period, prog) in enumerate(list(self._intervals)):
            if self.exit_requested:
                return
            if force or due <= now:
                self._test_run(prog)
                self._intervals[i] = (max(due + period / 1e9, now), period, prog)
                self.drain()

    def drain(self) -> None:
        """Deliver every event already in the ring buffer."""
        if self._ring is not None:
            self._ring.consume()
            self.out.flush()

    def _on_event(self, raw: Any) -> None:
        data = bytes(raw)
        if self.exit_requested and not self.in_end:
            return
        aid = int.from_bytes(data[:8], "little")
        actions = self.script.checked.actions
        if aid >= len(actions):
            return
        act = actions[aid]
        p = self.printer
        kind = act.kind
        if kind == "exit":
            self.exit_requested = True
            return
        if kind == "printf":
            p.message("printf", format_printf(act.fmt, p.args(act, data)), newline=False)
        elif kind == "time":
            p.message("time", p.now(act.fmt), newline=False)
        elif kind == "join":
            parts = []
            for i in range(len(act.args)):
                chunk = data[8 + i * 1024:8 + (i + 1) * 1024]
                if not chunk or chunk[0] == 0:
                    break
                parts.append(chunk.split(b"\0", 1)[0].decode("utf-8", "surrogateescape"))
            p.message("join", act.fmt.join(parts))
        elif kind == "cat":
            path = format_printf(act.fmt, p.args(act, data))
            p.message("cat", _cat(path), newline=False)
        elif kind == "system":
            cmd = format_printf(act.fmt, p.args(act, data))
            self.out.flush()
            p.message("syscall", _system(cmd), newline=False)
        elif kind == "print_map":
            self.print_map(act.map, act.top, act.div)
        elif kind == "print_value":
            self.out.write(p.printed_value(act.args[0], data[8:]))
        elif kind == "clear":
            self.clear_map(act.map)
        elif kind == "zero":
            self.zero_map(act.map)
        elif kind == "helper_error" and act.loc is not None:
            p.helper_error(self.script.source, act.fmt, act.loc, int.from_bytes(data[8:16], "little", signed=True))

    # -- maps ------------------------------------------------------------------------------------

    def map_items(self, name: str) -> list[tuple[bytes, bytes]]:
        """A script map's raw items."""
        return [(bytes(k), bytes(v)) for k, v in self.maps[map_ref(name)].raw_items()]

    def print_map(self, name: str, top: int = 0, div: int = 0) -> None:
        """``print(@name, top, div)``."""
        info = self.script.checked.maps[name]
        self.out.write(self.printer.map_text(info, self.map_items(name), top, div))

    def clear_map(self, name: str) -> None:
        """``clear(@name)``: every key deleted (an array is zeroed, as bpftrace does)."""
        if self.script.checked.maps[name].array:
            self.zero_map(name)
            return
        m = self.maps[map_ref(name)]
        for k, _ in m.raw_items():
            try:
                del m[bytes(k)]
            except (NotFoundError, BpfError):
                pass

    def zero_map(self, name: str) -> None:
        """``zero(@name)``: every value set to zero."""
        m = self.maps[map_ref(name)]
        info = self.script.checked.maps[name]
        if info.array:
            _put(m, 0, info.value_size)
            return
        for k, _ in m.raw_items():
            try:
                _put(m, bytes(k), info.value_size)
            except (NotFoundError, BpfError):
                pass

    def lost(self) -> int:
        """Events lost so far because the ring buffer was full."""
        total = 0
        for _, v in self.maps["drops"].raw_items():
            b = bytes(v)
            total += sum(int.from_bytes(b[i:i + 8], "little") for i in range(0, len(b) - 7, 8))
        return total

    def report_lost(self) -> None:
        """Print bpftrace's "Lost N events" for drops since the last report."""
        n = self.lost()
        if n > self.lost_reported:
            if self.options.json:
                self.out.write(f'{{"type": "lost_events", "data": {{"events": {n - self.lost_reported}}}}}\n')
            else:
                self.out.write(f"Lost {n - self.lost_reported} events\n")
            self.lost_reported = n

    # -- the end -----------------------------------------------------------------------------------

    def detach(self) -> None:
        """Close every link (probes stop firing)."""
        links, self.links = self.links, []
        self.kernel.detach_all(links)

    def finish(self, print_maps: bool = True) -> None:
        """Detach, deliver what is left, run ``END``, and print every map as bpftrace does at exit."""
        self.detach()
        self.drain()
        self.report_lost()
        self.in_end = True
        self.exit_requested = False
        for p, prog in self.loaded:
            if p.info.ctx.provider == "END":
                self._test_run(prog)
        self.drain()
        self.in_end = False
        if not print_maps:
            return
        self.out.flush()
        self.maps_out.write("\n\n")
        self.maps_out.flush()
        for name in sorted(self.script.checked.maps):
            info = self.script.checked.maps[name]
            text = self.printer.map_text(info, self.map_items(name))
            self.out.write(text)
        self.out.flush()

    def close(self) -> None:
        """Close links, the reader, programs and maps (idempotent).

        :raises BaseException: the first error a close raised, after everything was closed.
        """
        if self._closed:
            return
        self._closed = True
        closables: list[Any] = [*self.links]
        if self._ring is not None:
            closables.append(self._ring)
        closables += [p for _, p in self.loaded]
        closables += list(self.maps.values())
        self.links, self.loaded, self.maps, self._ring = [], [], {}, None
        api.close_all(closables)

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _put(m: api.Map, key: Any, size: int) -> None:
    """Store a zero value of ``size`` bytes at ``key`` (maps without BTF take ints for ≤ 8-byte values)."""
    try:
        m[key] = bytes(size)
    except (ParseError, TypeError, ValueError):
        m[key] = 0


def _drain_fd(fd: int) -> None:
    """Read and discard what a non-blocking fd holds (at most 64 KiB)."""
    try:
        os.read(fd, 65536)
    except (BlockingIOError, InterruptedError):
        pass


def _cat(path: str) -> str:
    try:
        with open(path, "rb") as f:
            return f.read(10240).decode("utf-8", "surrogateescape")
    except OSError as e:
        return f"ERROR: failed to open file '{path}': {e.strerror}\n"


def _system(cmd: str) -> str:
    import subprocess  # only scripts calling system() pay for it

    try:
        r = subprocess.run(cmd, shell=True, capture_output=True, check=False)
    except OSError as e:
        return f"{e}\n"
    return r.stdout.decode("utf-8", "surrogateescape")


def _map_name(name: str) -> str:
    clean = "".join(c if c.isalnum() or c == "_" else "_" for c in name.lstrip("@")) or "anon"
    return f"bt_{clean}"[:15]


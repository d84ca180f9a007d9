"""``bpfmux emulate OBJ``: run an object in the emulated kernel and show the trampolines."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ._common import UsageError, console, parse_size, user_input

DESCRIPTION = """\
Load a BPF object into bpfmux's emulated kernel (no root, nothing touches the
host kernel), attach every program by its section name, feed it calls, then
print what the programs recorded (maps, decoded through BTF) and, with
--show, the trampoline picture: for every traced function the image its patch
site calls (standard, multi, clone, filter, per-function), the programs it
runs in order, and the policy's costs.

Calls come from a recorded stream (--calls FILE, JSON lines) or a workload
spec (--workload): FUNC(ARGS)*N calls a kernel function N times,
tp:SYSTEM:EVENT*N hits a tracepoint, test_run does what BPF_PROG_TEST_RUN does
for the object's tracing programs (calls bpf_fentry_test1..9 or
bpf_modify_return_test). Without either, test_run when the object has
fentry/fexit/fmod_ret programs on those test functions; any other object is
loaded, verified and reported: each program loaded or rejected (and why),
attached or not, and the maps.

What a tool's user space sets before load can be set here too, as with
bpfmux run: --set NAME=VALUE, --map-size NAME=N (maps declared with
max_entries 0 get a default, with a note), --map-value-size, --skip NAME.

Stream lines: {"call": "f", "args": [1], "repeat": 3}, {"fire": "sched:x",
"fields": {...}, "args": [...]}, {"kprobe": "f", "args": [...]},
{"test_run": true}, {"task": {"pid": 42, "comm": "x"}}, {"clock": NS}.
"""

EPILOG = """\
examples:
  bpfmux emulate tests/bpf/multi.bpf.o --show
      seed and mainline multi programs on bpf_fentry_test*: one shared image
  bpfmux emulate tests/bpf/modify_return.bpf.o --workload 'bpf_modify_return_test(1,0)' --policy filter
  bpfmux emulate OBJ --calls calls.jsonl --json          replay a recorded call stream
  bpfmux emulate OBJ --btf none                          only the built-in test functions

Limits: a program run executes at most --run-budget instructions (callbacks
included; default 2**22), the emulated kernel holds at most --memory-budget
of maps, ring buffers and stacks (default 1G; a map past it fails with
ENOMEM), and each map's dump shows at most --dump-entries entries (default
1000, 0 for all), written as they are read.

exit status: 0 on success, 3 when some programs were rejected or did not
attach (each is reported), 1 on an error (bad object, no program loaded, bad
stream, a budget exhausted; one line, --debug adds the traceback), 2 on bad
usage (e.g. a malformed --workload), 130 on Ctrl-C.
"""

#: exit status: reported, but some programs were rejected or did not attach
EXIT_PARTIAL = 3


def register(sub: Any) -> None:
    """Add ``emulate`` to the subcommand parsers."""
    p = sub.add_parser("emulate", help="run a BPF object in the emulated kernel; show its trampolines",
                       description=DESCRIPTION, epilog=EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("object", metavar="OBJ", help="BPF ELF object (.bpf.o)")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--calls", metavar="FILE", help="JSON-lines call stream to replay ('-' for stdin)")
    src.add_argument("--workload", metavar="SPEC", help="e.g. 'bpf_fentry_test1(1)*100,test_run'")
    p.add_argument("--policy", default="clone", choices=["clone", "filter", "per-function"],
                   help="trampoline policy (default: clone, the seed's design)")  # fmt: skip
    p.add_argument("--btf", default="auto", metavar="auto|none|PATH",
                   help="kernel BTF for the function table (default: this machine's vmlinux when present)")
    p.add_argument("--tier", default="fast", choices=["fast", "checked", "native"],
                   help="VM tier (default: fast; native needs pip install bpfmux[native], else runs fast)")
    p.add_argument("--program", action="append", metavar="NAME", help="load and attach only these programs")
    p.add_argument("--skip", action="append", default=[], metavar="NAME", help="do not load this program")
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                   help="set a global (.rodata, .data, .bss) before load")  # fmt: skip
    p.add_argument("--map-size", action="append", default=[], metavar="NAME=N", help="max_entries of a map")
    p.add_argument("--map-value-size", action="append", default=[], metavar="NAME=BYTES", help="value size of a map")
    p.add_argument("--show", action="store_true", help="print every patched function's image and the costs")
    p.add_argument("--no-dump", action="store_true", help="do not print the maps")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")
    p.add_argument("--run-budget", type=int, metavar="N",
                   help="instructions one program run may execute (default 2**22)")  # fmt: skip
    p.add_argument("--memory-budget", metavar="SIZE",
                   help="memory the emulated kernel may hold, e.g. 512M, 4G (default 1G)")  # fmt: skip
    p.add_argument("--dump-entries", type=int, default=1000, metavar="N",
                   help="entries of each map to print (default 1000; 0: all)")  # fmt: skip
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``bpfmux emulate`` (errors are reported by the caller's guard).

    :raises UsageError: a malformed ``--workload``, ``--set`` or ``--map-size``, or an unknown ``--policy``.
    :raises CliError: no program of the object loaded; a global, map or program the object does not have.
    :raises BpfmuxError: a bad object or call stream.
    :raises OSError: the object, the BTF or the call stream cannot be read.
    """
    from ..emu.kernel.emulator import Emulator
    from ..emu.kernel.replay import apply, parse_calls, parse_workload
    from ..emu.kernel.trampoline import make_policy
    from ..errors import BpfmuxError, NotSupportedError
    from ..obj import load_object
    from ..uapi import ProgType
    from ._common import CliError
    from .run_setup import configure

    workload = None
    if args.workload:
        with user_input("--workload"):
            workload = parse_workload(args.workload)
    with user_input("--policy"):
        make_policy(args.policy)
    memory_budget = None
    if args.memory_budget is not None:
        with user_input("--memory-budget"):
            memory_budget = parse_size(args.memory_budget)
    if args.run_budget is not None and args.run_budget < 1:
        raise UsageError(f"--run-budget must be at least 1, not {args.run_budget}")
    if args.dump_entries < 0:
        raise UsageError(f"--dump-entries must be 0 (all) or more, not {args.dump_entries}")
    spec = load_object(args.object)
    args.attach = []
    notes: list[str] = []
    configure(spec, args, notes.append)
    for note in notes:
        print(f"bpfmux: {note}", file=sys.stderr)
    btf: Any = None if args.btf == "none" else args.btf
    with Emulator(btf=btf, policy=args.policy, tier=args.tier, run_budget=args.run_budget,
                  memory_budget=memory_budget) as emu:
        coll = emu.load(spec, programs=args.program, partial=True)
        if not coll.programs and coll.failed:
            name, err = next(iter(coll.failed.items()))
            raise CliError(f"no program of {args.object} loaded; {name}: {_first_line(err)}")
        attached, skipped = [], dict(coll.skipped)
        failed = {name: f"rejected: {_first_line(err)}" for name, err in coll.failed.items()}
        for name, prog in coll.programs.items():
            try:
                attached.append(prog.attach())
            except NotSupportedError as err:
                skipped[name] = str(err)
            except BpfmuxError as err:  # one program that cannot attach must not hide the others
                if prog.prog_type == ProgType.PERF_EVENT:
                    skipped[name] = "perf_event programs need a perf event (use the Python API)"
                else:
                    failed[name] = f"not attached: {_first_line(err)}"
        if args.calls:
            from ..emu.kernel.replay import MAX_STREAM_BYTES
            from ..host.files import bounded_lines, open_text

            stream = sys.stdin if args.calls == "-" else open_text(args.calls, MAX_STREAM_BYTES, "call stream")
            with stream:
                events = list(parse_calls(bounded_lines(stream, args.calls, MAX_STREAM_BYTES), args.calls))
        elif workload is not None:
            events = workload
        else:
            events = parse_workload("test_run") if _on_test_functions(coll.programs.values()) else []
        ran = apply(emu, events, coll.programs)
        report = {
            "object": args.object,
            "policy": args.policy,
            "tier": emu.tier,
            "events": ran,
            "programs": {n: {"runs": p.runs, "section": p.section, "verdict": "loaded"}  # type: ignore[attr-defined]  # an emulator collection: EmulatedPrograms
                         for n, p in coll.programs.items()},
            "rejected": {n: _first_line(e) for n, e in coll.failed.items()},
            "skipped": skipped,
            "failed": failed,
            "trace_log": list(getattr(emu.vm, "trace_log", [])),
        }
        if args.show:
            report["sites"] = [
                {"function": s.function, "image": s.image, "programs": list(s.programs),
                 "shared_with": s.shared_with, "image_bytes": s.image_bytes}
                for s in emu.sites()
            ]
            report["costs"] = emu.costs
        maps = {} if args.no_dump else dict(coll.maps)  # read while the emulator still holds them
        if args.json:
            _print_json(report, maps, args.dump_entries)
        else:
            _print(report, maps, args.dump_entries)
        for link in attached:
            link.close()
        coll.close()
    return EXIT_PARTIAL if failed else 0


#: the kernel's BPF_PROG_TEST_RUN targets of fentry/fexit/fmod_ret programs
_TEST_FUNCTIONS = ("bpf_fentry_test", "bpf_modify_return_test")


def _on_test_functions(programs: Any) -> bool:
    """True when a tracing program of the object attaches to a function test_run calls."""
    from ..uapi import ProgType

    for p in programs:
        if p.prog_type == ProgType.TRACING and (p.attach_target or "").startswith(_TEST_FUNCTIONS):
            return True
        if p.prog_type == ProgType.TRACING and p.flags and "multi" in (p.section or ""):
            return True  # a multi program: its globs usually name the test functions
    return False


def _first_line(err: BaseException) -> str:
    lines = str(err).strip().splitlines()
    return lines[0] if lines else type(err).__name__


def _dump(m: Any) -> Any:
    from ..errors import BpfmuxError

    try:
        if hasattr(m, "variables"):
            return dict(m.items()) if m.variables else {"raw": m.raw().hex()}
        return {_key(k): v for k, v in m.items()}
    except BpfmuxError as err:  # a map type without lookup from user space: say so
        return {"unreadable": str(err)}


def _entries(m: Any) -> tuple[Any, int]:
    """``(iterator of (key, value), number of entries)`` of a map or data section.

    :raises BpfmuxError: the map has no lookup from user space.
    """
    if hasattr(m, "variables"):
        if not m.variables:
            return iter([("raw", m.raw().hex())]), 1
        return iter(m.items()), len(m.variables)
    return iter(m.items()), len(m)


def _write_map(write: Any, m: Any, limit: int, compact: bool = False) -> None:
    """Write one map as a JSON object, entry by entry (at most ``limit``; 0: all;
    ``compact``: long runs of zeros shortened for a person to read)."""
    from ..errors import BpfmuxError

    try:
        items, count = _entries(m)
        first = next(items, None)  # a map without user-space lookup fails here, before anything is written
    except BpfmuxError as err:
        write(json.dumps({"unreadable": str(err)}))
        return
    write("{")
    n = 0
    item = first
    while item is not None:
        if limit and n >= limit:
            write(f", {json.dumps('...')}: {json.dumps(f'{count - n} more entries (--dump-entries 0 prints all)')}")
            break
        k, v = item
        k = _key(k)
        write(("" if n == 0 else ", ") + json.dumps(k if isinstance(k, str) else str(k)) + ": "
              + json.dumps(_compact(v) if compact else v, default=_jsonable))
        n += 1
        item = next(items, None)
    write("}")


def _print_json(report: dict[str, Any], maps: dict[str, Any], limit: int) -> None:
    """The report as one JSON object on stdout, the maps streamed."""
    write = sys.stdout.write
    keys = ["object", "policy", "tier", "events", "programs", "rejected", "skipped", "failed"]
    write("{" + ", ".join(f"{json.dumps(k)}: {json.dumps(report[k], default=_jsonable)}" for k in keys))
    write(', "maps": {')
    for i, (name, m) in enumerate(maps.items()):
        write(("" if i == 0 else ", ") + json.dumps(name) + ": ")
        _write_map(write, m, limit)
    write("}")
    for k in ("trace_log", "sites", "costs"):
        if k in report:
            write(f", {json.dumps(k)}: {json.dumps(report[k], default=_jsonable)}")
    write("}\n")


def _compact(v: Any) -> Any:
    """Long all-zero byte strings and arrays shortened for a person to read."""
    from ..show.values import SPARSE_FROM, is_number

    if isinstance(v, dict):
        return {k: _compact(x) for k, x in v.items()}
    if isinstance(v, bytes | bytearray):
        from ..show.values import plain

        return plain(bytes(v))
    if isinstance(v, list):
        if len(v) > SPARSE_FROM and all(is_number(x) for x in v) and sum(1 for x in v if x) <= len(v) // 2:
            return {"length": len(v), "non-zero": {str(i): x for i, x in enumerate(v) if x}}
        return [_compact(x) for x in v]
    if hasattr(v, "as_dict"):
        return _compact(v.as_dict())
    return v


def _key(k: Any) -> Any:
    if isinstance(k, bytes):
        return int.from_bytes(k, "little") if len(k) in (1, 2, 4, 8) else k.hex()
    return k if isinstance(k, str | int) else str(k)


def _jsonable(v: Any) -> Any:
    if isinstance(v, bytes | bytearray):
        return v.hex()
    if hasattr(v, "as_dict"):  # BTF records
        return v.as_dict()
    return str(v)


def _print(report: dict[str, Any], maps: dict[str, Any], limit: int) -> None:
    from rich.markup import escape
    from rich.table import Table

    con = console()
    con.print(f"[bold]{report['object']}[/] in the emulated kernel, policy [bold]{report['policy']}[/], "
              f"{report['tier']} tier: {report['events']} calls/hits")
    t = Table("program", "section", "runs", title="programs")
    for n, p in report["programs"].items():
        t.add_row(n, p["section"], str(p["runs"]))
    con.print(t)
    for n, why in report["failed"].items():
        con.print(f"  {n}: {why}", soft_wrap=True)
    for n, why in report["skipped"].items():
        con.print(f"  not attached: {n}: {why}", soft_wrap=True)
    if "sites" in report:
        t = Table("function", "image", "programs (run order)", "shared by", "bytes", title="trampolines")
        for s in report["sites"]:
            t.add_row(s["function"], s["image"], ", ".join(s["programs"]), str(s["shared_with"]), str(s["image_bytes"]))
        con.print(t)
        con.print("costs: " + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in report["costs"].items()))
    for n, m in maps.items():
        con.print(f"[bold]{escape(n)}[/]: ", end="")
        con.file.flush()
        _write_map(con.file.write, m, limit, compact=True)
        con.file.write("\n")
    for line in report["trace_log"]:
        con.print(f"trace: {line}")

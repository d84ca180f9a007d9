"""``bpfmux emulate OBJ``: run an object in the emulated kernel and show the trampolines."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ._common import console, user_input

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
tracing programs.

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

exit status: 0 on success, 1 on an error (bad object, rejected program, bad
stream; one line, --debug adds the traceback), 2 on bad usage (e.g. a
malformed --workload), 130 on Ctrl-C.
"""


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
    p.add_argument("--show", action="store_true", help="print every patched function's image and the costs")
    p.add_argument("--no-dump", action="store_true", help="do not print the maps")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``bpfmux emulate`` (errors are reported by the caller's guard).

    :raises UsageError: a malformed ``--workload`` or an unknown ``--policy``.
    :raises BpfmuxError: a bad object or call stream, a rejected program.
    :raises OSError: the object, the BTF or the call stream cannot be read.
    """
    from ..emu.kernel.emulator import Emulator
    from ..emu.kernel.replay import apply, parse_calls, parse_workload
    from ..emu.kernel.trampoline import make_policy
    from ..errors import BpfmuxError, NotSupportedError
    from ..uapi import ProgType

    workload = None
    if args.workload:
        with user_input("--workload"):
            workload = parse_workload(args.workload)
    with user_input("--policy"):
        make_policy(args.policy)
    btf: Any = None if args.btf == "none" else args.btf
    with Emulator(btf=btf, policy=args.policy, tier=args.tier) as emu:
        coll = emu.load(args.object, programs=args.program)
        attached, skipped = [], dict(coll.skipped)
        for name, prog in coll.programs.items():
            try:
                attached.append(prog.attach())
            except NotSupportedError as err:
                skipped[name] = str(err)
            except BpfmuxError as err:  # one program that cannot attach must not hide the others
                if prog.prog_type == ProgType.PERF_EVENT:
                    skipped[name] = "perf_event programs need a perf event (use the Python API)"
                else:
                    skipped[name] = str(err)
        if args.calls:
            stream = sys.stdin if args.calls == "-" else open(args.calls, encoding="utf-8")
            with stream:
                events = list(parse_calls(stream, args.calls))
        elif workload is not None:
            events = workload
        else:
            has_tracing = any(p.prog_type == ProgType.TRACING for p in coll.programs.values())
            events = parse_workload("test_run") if has_tracing else []
        ran = apply(emu, events, coll.programs)
        report = {
            "object": args.object,
            "policy": args.policy,
            "tier": emu.tier,
            "events": ran,
            "programs": {n: {"runs": p.runs, "section": p.section} for n, p in coll.programs.items()},  # type: ignore[attr-defined]  # an emulator collection: EmulatedPrograms
            "skipped": skipped,
            "maps": {} if args.no_dump else {n: _dump(m) for n, m in coll.maps.items()},
            "trace_log": list(getattr(emu.vm, "trace_log", [])),
        }
        if args.show:
            report["sites"] = [
                {"function": s.function, "image": s.image, "programs": list(s.programs),
                 "shared_with": s.shared_with, "image_bytes": s.image_bytes}
                for s in emu.sites()
            ]
            report["costs"] = emu.costs
        for link in attached:
            link.close()
        coll.close()
    if args.json:
        print(json.dumps(report, default=_jsonable))
    else:
        _print(report)
    return 0


def _dump(m: Any) -> Any:
    from ..errors import BpfmuxError

    try:
        if hasattr(m, "variables"):
            return dict(m.items()) if m.variables else {"raw": m.raw().hex()}
        return {_key(k): v for k, v in m.items()}
    except BpfmuxError as err:  # a map type without lookup from user space: say so
        return {"unreadable": str(err)}


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


def _print(report: dict[str, Any]) -> None:
    from rich.table import Table

    con = console()
    con.print(f"[bold]{report['object']}[/] in the emulated kernel, policy [bold]{report['policy']}[/], "
              f"{report['tier']} tier: {report['events']} calls/hits")
    t = Table("program", "section", "runs", title="programs")
    for n, p in report["programs"].items():
        t.add_row(n, p["section"], str(p["runs"]))
    con.print(t)
    for n, why in report["skipped"].items():
        con.print(f"  not attached: {n}: {why}")
    if "sites" in report:
        t = Table("function", "image", "programs (run order)", "shared by", "bytes", title="trampolines")
        for s in report["sites"]:
            t.add_row(s["function"], s["image"], ", ".join(s["programs"]), str(s["shared_with"]), str(s["image_bytes"]))
        con.print(t)
        con.print("costs: " + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in report["costs"].items()))
    for n, contents in report["maps"].items():
        con.print(f"[bold]{n}[/]: {json.dumps(contents, default=_jsonable)}", soft_wrap=True)
    for line in report["trace_log"]:
        con.print(f"trace: {line}")

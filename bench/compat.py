"""compat: bcc's libbpf-tools on bpfmux and on libbpf 1.1, tool by tool.

For each object of the corpus (``../shared/corpus/libbpf-tools/obj``), with
the settings its tool's user space applies on this kernel (the one table of
``tests/corpus/corpus_tools.py``):

- ours, live: the object loaded (every program the tool loads) and attached
  (every attach the tool makes) by bpfmux; ``events``: the tool's workload
  of ``tests/corpus/corpus_workloads.py`` shows exactly its effect;
- peer: the same plan — the same variable bytes, map sizes, programs left
  out, attach targets, then the same attaches — carried out by a reference
  loader on the system's libbpf (Debian 12: 1.1), ``bench/compat_loader.c``,
  built here at run time with ``cc … -lbpf -lelf -lz`` into a cache
  directory (never committed);
- emulator: every program judged by the emulated kernel's verifier and by
  this kernel's (each program on its own, the same settings): how many both
  judge and how many they disagree on;
- guest (``--guest``): the kprobe and fentry tools started by bpfmux in the
  VM tier's 6.12 guest (``tests/vm/vmtest.py``; slow: a TCG boot), and their
  programs judged by the guest's verifier and the emulated one.

A tool *starts* when everything it loads loads, everything it attaches
attaches, and it attaches something. Figures: the number of tools each
loader starts on this kernel; ``ratio = ours / peer`` (≥ 1: bpfmux starts
every tool libbpf starts). Writes ``bench/results/compat.json``; the last
line is ``compat: ours=N peer=M ratio=R``.

Needs root, the corpus, cc and libbpf-dev. Usage:
``python3 bench/compat.py [--tools a,b] [--no-workloads] [--guest]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import write_result

NAME = "compat"
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "corpus"))
sys.path.insert(0, str(ROOT / "src"))

#: perf_event_attr.type of the software and hardware events
PERF_TYPE_HARDWARE, PERF_TYPE_SOFTWARE = 0, 1


def build_loader() -> Path:
    """``compat_loader`` built from its source into ``$XDG_CACHE_HOME/bpfmux-compat`` (rebuilt when the source is
    newer).

    :raises SystemExit: no C compiler, or the build failed (libbpf-dev missing).
    """
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        raise SystemExit("compat: needs a C compiler (cc) to build the reference loader")
    src = Path(__file__).resolve().parent / "compat_loader.c"
    out_dir = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "bpfmux-compat"
    out_dir.mkdir(parents=True, exist_ok=True)
    exe = out_dir / "compat_loader"
    if not exe.exists() or exe.stat().st_mtime < src.stat().st_mtime:
        proc = subprocess.run([cc, "-O2", "-Wall", "-o", str(exe), str(src), "-lbpf", "-lelf", "-lz"],
                              capture_output=True, text=True)
        if proc.returncode:
            raise SystemExit(f"compat: cannot build the reference loader (install libbpf-dev):\n{proc.stderr}")
    return exe


def libbpf_version() -> str:
    out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "libbpf-dev"], capture_output=True, text=True)
    return out.stdout.strip() or "unknown"


def peer_plan(tool: Any, settings: Any) -> str:
    """The reference loader's commands for ``tool`` with ``settings`` (the same bytes bpfmux writes)."""
    from corpus_harness import object_path

    from bpfmux.host.ldcache import resolve_binary
    from bpfmux.obj import load_object
    from bpfmux.obj.sections import SecFlags
    from bpfmux.obj.variables import find_global
    from bpfmux.uapi import PerfHwId, PerfSwId

    path = object_path(tool.name)
    spec = load_object(path)
    lines = [f"object {path}"]
    for name, value in settings.globals.items():
        var = find_global(spec, name)
        spec.set_global(name, value)
        data = spec.maps[var.section].value or bytes(spec.maps[var.section].value_size)
        lines.append(f"global {var.section} {var.offset} {data[var.offset:var.offset + var.size].hex()}")
    lines += [f"max_entries {m} {n}" for m, n in settings.map_sizes.items()]
    lines += [f"value_size {m} {n}" for m, n in settings.value_sizes.items()]
    lines += [f"autoload {p} 0" for p in sorted(settings.off)]
    lines += [f"target {p} {f}" for p, f in settings.targets.items()]
    lines.append("load")
    for ps in spec.programs.values():
        if ps.name in settings.off or not ps.autoload or ps.name in settings.skip_attach:
            continue
        kind = ps.section_info.kind
        ret = int(kind is not None and SecFlags.RETPROBE in kind.flags)
        if ps.name in settings.attach:
            for target in settings.attach[ps.name]:
                if ":" in target:  # BINARY:FUNCTION
                    binary, func = target.rsplit(":", 1)
                    lines.append(f"uprobe {ps.name} {ret} -1 {resolve_binary(binary)} {func}")
                else:
                    lines.append(f"kprobe {ps.name} {ret} {target}")
        elif ps.name in settings.perf:
            pe = settings.perf[ps.name]
            ptype, config = ((PERF_TYPE_HARDWARE, int(PerfHwId[pe.event.upper()])) if pe.hardware
                             else (PERF_TYPE_SOFTWARE, int(PerfSwId[pe.event.upper()])))
            how, n = ("freq", pe.freq) if pe.period is None else ("period", pe.period)
            lines.append(f"perf {ps.name} {ptype} {config} {how} {n}")
        else:
            lines.append(f"auto {ps.name}")
    return "\n".join(lines) + "\n"


def run_peer(loader: Path, plan: str) -> dict[str, Any]:
    """The reference loader's outcome: ``loaded``, ``started``, ``links``, ``errors``."""
    proc = subprocess.run([str(loader)], input=plan, capture_output=True, text=True, timeout=120)
    steps = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    done = next((s for s in steps if s.get("step") == "done"), {})
    load = next((s for s in steps if s.get("step") == "load"), {"ok": False, "error": proc.stderr.strip()[-200:]})
    errors = {s.get("name") or s["step"]: s.get("error", "") for s in steps if not s.get("ok", True)}
    return {"loaded": bool(load.get("ok")), "started": bool(done.get("started")), "links": done.get("links", 0),
            "errors": errors}


def run_ours(kernel: Any, tool: Any, settings: Any) -> dict[str, Any]:
    from corpus_harness import start

    st = start(kernel, tool, settings)
    try:
        return {"loaded": st.loaded, "started": st.started and bool(st.links), "links": len(st.links),
                "errors": {**st.failed, **st.attach_failed}}
    finally:
        st.close()


def run_emulator(kernel: Any, tool: Any, settings: Any, vmlinux: Any) -> dict[str, Any]:
    from corpus_verdicts import NONE, disagreements, verdicts

    from bpfmux.emu import Emulator

    kernel_v = verdicts(kernel, tool, settings)
    with Emulator(btf=vmlinux) as emu:
        emu_v = verdicts(emu, tool, settings)
    both = [n for n in kernel_v if kernel_v[n][0] != NONE and emu_v.get(n, (NONE, ""))[0] != NONE]
    dis = disagreements(kernel_v, emu_v)
    return {"programs": len(kernel_v), "emulator_loads": sum(v == "accept" for v, _ in emu_v.values()),
            "both_judge": len(both), "agree": len(both) - len(dis), "disagree": dis}


def run_guest(tools: list[str]) -> dict[str, Any]:
    """bpfmux in the VM tier's guest for ``tools``: ``{tool: {started, errors}}``, or ``{"error": why}``."""
    py = os.path.realpath(sys.executable)
    cmd = [sys.executable, str(ROOT / "tests" / "vm" / "vmtest.py"), "--", py, str(Path(__file__).resolve()),
           "--guest-side", "--tools", ",".join(tools)]
    if shutil.which("flock"):  # the VM tier is shared: one guest at a time on this machine
        cmd = ["flock", "/tmp/vm.lock", "nice", "-n", "10", *cmd]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=3600, cwd=ROOT)
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith('{"guest"'):
            return json.loads(line)["guest"]
    return {"error": f"the guest reported nothing (exit {proc.returncode}): {proc.stderr.strip()[-300:]}"}


def guest_side(tools: list[str]) -> int:
    """In the guest: start each tool with bpfmux, and judge its programs with the guest's verifier and the
    emulated one (the fentry programs only a kernel with fentry judges); one JSON line."""
    from corpus_probes import LiveProbe
    from corpus_tools import TOOLS

    from bpfmux.btf import Btf

    probe = LiveProbe()
    vmlinux = Btf.vmlinux()
    out: dict[str, Any] = {}
    for name in tools:
        t = TOOLS[name]
        try:
            settings = t.settings(probe)
            out[name] = run_ours(probe.kernel, t, settings)
            out[name]["emulator"] = run_emulator(probe.kernel, t, settings, vmlinux)
        except Exception as err:  # one tool's crash is that tool's result
            out[name] = {"started": False, "errors": {"": f"{type(err).__name__}: {err}"}}
    print(json.dumps({"guest": out}), flush=True)
    return 0


def _cell(r: dict[str, Any] | None) -> str:
    if r is None:
        return "-"
    if r.get("started"):
        return f"started ({r.get('links', 0)} links)"
    if r.get("loaded"):
        return "loaded; attach failed"
    return "not loaded"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tools", help="comma-separated tools (default: every object of the corpus)")
    p.add_argument("--no-workloads", action="store_true", help="skip the events column (workloads)")
    p.add_argument("--guest", action="store_true", help="also run the kprobe/fentry tools in the VM tier's guest")
    p.add_argument("--guest-side", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)

    from corpus_harness import CORPUS, SKIP_REASON, tool_names
    from corpus_tools import TOOLS

    if CORPUS is None:
        raise SystemExit(f"compat: {SKIP_REASON}")
    names = args.tools.split(",") if args.tools else tool_names()
    if args.guest_side:
        return guest_side(names)
    if os.geteuid() != 0:
        raise SystemExit("compat: needs root (it loads the objects into this kernel)")
    from corpus_probes import LiveProbe
    from corpus_workloads import WORKLOADS, check

    from bpfmux.btf import Btf

    loader = build_loader()
    probe = LiveProbe()
    vmlinux = Btf.vmlinux()
    rows: dict[str, dict[str, Any]] = {}
    t0 = time.monotonic()
    for name in names:
        tool = TOOLS[name]
        settings = tool.settings(probe)
        row: dict[str, Any] = {"kinds": sorted(tool.kinds), "runs_here": tool.runs_here, "needs": tool.needs}
        row["ours"] = run_ours(probe.kernel, tool, settings)
        row["peer"] = run_peer(loader, peer_plan(tool, settings))
        if name in WORKLOADS and not args.no_workloads:
            with tempfile.TemporaryDirectory() as tmp:
                ok, detail = check(name, Path(tmp))
            row["events"] = {"ok": ok, "detail": detail}
        row["emulator"] = run_emulator(probe.kernel, tool, settings, vmlinux)
        rows[name] = row
        print(f"compat: {name}: ours {_cell(row['ours'])}, peer {_cell(row['peer'])}", file=sys.stderr, flush=True)
    if args.guest:
        guest = run_guest([n for n in names if not TOOLS[n].runs_here])
        for n, r in guest.items():
            if n in rows:
                rows[n]["guest"] = r
        if "error" in guest:
            print(f"compat: guest: {guest['error']}", file=sys.stderr)
    ours = sum(r["ours"]["started"] for r in rows.values())
    peer = sum(r["peer"]["started"] for r in rows.values())
    both_missing = [n for n, r in rows.items() if r["peer"]["started"] and not r["ours"]["started"]]
    _print_table(rows)
    ratio = ours / peer if peer else float("inf")
    result = {
        "kernel": os.uname().release,
        "libbpf": libbpf_version(),
        "seconds": round(time.monotonic() - t0, 1),
        "figure": "tools started (everything the tool loads loaded, everything it attaches attached)",
        "ours": ours,
        "peer": peer,
        "ratio": round(ratio, 3),
        "peer_started_ours_not": both_missing,
        "events_ok": sum(r.get("events", {}).get("ok", False) for r in rows.values()),
        "events_run": sum("events" in r for r in rows.values()),
        "emulator_disagreements": {n: r["emulator"]["disagree"] for n, r in rows.items() if r["emulator"]["disagree"]},
        "guest_emulator_disagreements": {n: r["guest"]["emulator"]["disagree"] for n, r in rows.items()
                                         if r.get("guest", {}).get("emulator", {}).get("disagree")},
        "tools": rows,
    }
    write_result(NAME, result)
    print(f"{NAME}: ours={ours} peer={peer} ratio={ratio:.2f}")
    return 0


def _print_table(rows: dict[str, dict[str, Any]]) -> None:
    head = f"{'tool':15} {'ours: load':11} {'attach':8} {'events':7} {'peer: load':11} {'attach':8} " \
           f"{'emulator':16} {'guest':8}"
    print(head)
    for n, r in rows.items():
        o, pe = r["ours"], r["peer"]
        ev = r.get("events")
        em = r["emulator"]
        g = r.get("guest")
        print(f"{n:15} {'yes' if o['loaded'] else 'no':11} {'yes' if o['started'] else 'no':8} "
              f"{'-' if ev is None else 'yes' if ev['ok'] else 'NO':7} {'yes' if pe['loaded'] else 'no':11} "
              f"{'yes' if pe['started'] else 'no':8} "
              f"{em['agree']}/{em['both_judge']} agree{'' if not em['disagree'] else ' !':3} "
              f"{'-' if g is None else 'yes' if g.get('started') else 'no':8}")


if __name__ == "__main__":
    sys.exit(main())

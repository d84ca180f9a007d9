"""Count every syscall of a workload on all ``syscalls:sys_enter_*``
tracepoints: bpfmux vs bpftrace.

Both count per syscall, only for the workload process (its command name is
the unique ``bpfmuxwl``: a copy of GNU ``find`` listing
``/usr/include`` into a pipe), and the same workload runs once under
each tool:

- peer: ``bpftrace -e 'tracepoint:syscalls:sys_enter_* /comm == "bpfmuxwl"/
  { @[probe] = count(); }' -c WORKLOAD``: one perf event per tracepoint
  (360 here); detaching each costs the kernel an RCU grace period;
- ours: a fresh ``python3`` process that loads one raw tracepoint program on
  ``sys_enter`` (the tracepoint every ``sys_enter_*`` event hangs off), which
  filters on the command name and counts per syscall id in the kernel, runs
  the workload, detaches and reads the counts. Syscall ids are named through
  the kernel headers' ``__NR_*`` table (plus the few syscalls whose tracepoint
  is named after their kernel function, ``newstat`` for ``stat`` …).

Also measured (JSON only): the same count done bpftrace's way with bpfmux, a
tracepoint program on all 360 tracepoints through perf-event links
(``attach_many``, closed on several threads).

Figure: wall-clock seconds of each whole tool run (process start to exit:
attach + workload + detach; lower is better); ``ratio = peer / ours``. Counts
are compared syscall by syscall; any difference is printed and recorded.
Writes ``bench/results/attach_tracepoints.json``.

Needs root, bpftrace, GNU find. Usage: ``python3 bench/attach_tracepoints.py``.
"""

from __future__ import annotations

import json
import re
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import comm_words, missing_root_or_bpftrace, run_bpftrace, run_ours_child, workload_copy, write_result

NAME = "attach_tracepoints"
COMM = "bpfmuxwl"
UNISTD = "/usr/include/x86_64-linux-gnu/asm/unistd_64.h"
#: syscalls whose tracepoint carries the kernel function's name, not the __NR_ name
TP_RENAMES = {"stat": "newstat", "fstat": "newfstat", "lstat": "newlstat", "uname": "newuname",
              "sendfile": "sendfile64", "umount2": "umount"}  # fmt: skip
MAX_NR = 1024


def make_workload(tmp: Path) -> list[str]:
    return [str(workload_copy("find", tmp, COMM)), "/usr/include", "-type", "f"]


def syscall_names() -> dict[int, str]:
    """syscall number → name of its ``sys_enter_*`` tracepoint."""
    out = {}
    for line in Path(UNISTD).read_text().splitlines():
        m = re.match(r"#define __NR_(\w+)\s+(\d+)$", line.strip())
        if m:
            out[int(m.group(2))] = TP_RENAMES.get(m.group(1), m.group(1))
    return out


def build_program(map_fd: int, *, raw: bool) -> bytes:
    """Count hits only for COMM: per syscall id (``ctx[1]`` of raw sys_enter),
    or per BPF cookie (tracepoint program variant)."""
    from bpfmux.isa.build import R0, R1, R2, R6, R7, R10, Asm
    from bpfmux.uapi import HelperId

    w0, w1 = comm_words(COMM)
    a = Asm()
    a.mov(R6, R1)
    a.mov(R1, R10).add(R1, -16).mov(R2, 16).call(HelperId.get_current_comm)
    a.ldxdw(R1, R10, -16).ld_imm64(R2, w0).jne(R1, R2, "out")
    a.ldxdw(R1, R10, -8).ld_imm64(R2, w1).jne(R1, R2, "out")
    if raw:
        a.ldxdw(R7, R6, 8)  # raw sys_enter(regs, id): args[1] = syscall id
    else:
        a.mov(R1, R6).call(HelperId.get_attach_cookie).mov(R7, R0)
    a.jge(R7, MAX_NR, "out")
    a.stxw(R10, -20, R7)
    a.ld_map_fd(R1, "counts").mov(R2, R10).add(R2, -20).call(HelperId.map_lookup_elem)
    a.jeq(R0, 0, "out").mov(R1, 1).atomic_add(R0, 0, R1)
    a.label("out").mov(R0, 0).exit()
    return a.assemble().encode({"counts": map_fd})


def read_counts(counts, n: int) -> list[int]:
    from bpfmux.live import sys as lsys

    out = bytearray(8)
    vals = []
    for i in range(n):
        lsys.map_lookup_elem(counts, struct.pack("<I", i), out)
        vals.append(struct.unpack("<Q", out)[0])
    return vals


def ours_child(workload: list[str]) -> None:
    """The measured bpfmux run: one raw tracepoint program on sys_enter."""
    t0 = time.perf_counter()
    from bpfmux.live import links
    from bpfmux.live import sys as lsys
    from bpfmux.uapi import MapType, ProgType

    t_import = time.perf_counter()
    counts = lsys.map_create(MapType.ARRAY, 4, 8, MAX_NR, name="sys_hits")
    fd = lsys.prog_load(ProgType.RAW_TRACEPOINT, build_program(counts.fd, raw=True), "GPL", name="sys_hits")
    prog = links.RawProgram(fd, ProgType.RAW_TRACEPOINT, name="sys_hits", section="raw_tp/sys_enter")
    t_load = time.perf_counter()
    link = prog.attach()
    t_attach = time.perf_counter()
    subprocess.run(workload, check=True, stdout=subprocess.PIPE)
    t_work = time.perf_counter()
    link.close()
    t_detach = time.perf_counter()
    names = syscall_names()
    per_tp: dict[str, int] = {}
    unmapped: dict[int, int] = {}
    for nr, v in enumerate(read_counts(counts, MAX_NR)):
        if v:
            if nr in names:
                per_tp[f"sys_enter_{names[nr]}"] = v
            else:
                unmapped[nr] = v
    prog.close()
    counts.close()
    print(json.dumps({
        "mechanism": "raw_tracepoint", "links": 1, "counts": per_tp, "unmapped_syscalls": unmapped,
        "phases_s": {"imports": t_import - t0, "load": t_load - t_import, "attach": t_attach - t_load,
                     "workload": t_work - t_attach, "detach": t_detach - t_work},
    }))  # fmt: skip


def ours_perf_event_variant(workload: list[str]) -> dict:
    """bpftrace's approach with bpfmux: a tracepoint program on every
    sys_enter_* tracepoint through perf-event links, closed in parallel."""
    from bpfmux.host import tracefs
    from bpfmux.live import links
    from bpfmux.live import sys as lsys
    from bpfmux.uapi import MapType, ProgType

    t0 = time.perf_counter()
    tps = [f"{c}:{n}" for c, n in tracefs.list_tracepoints("syscalls:sys_enter_*")]
    counts = lsys.map_create(MapType.ARRAY, 4, 8, MAX_NR, name="tp_hits")
    fd = lsys.prog_load(ProgType.TRACEPOINT, build_program(counts.fd, raw=False), "GPL", name="tp_hits")
    prog = links.RawProgram(fd, ProgType.TRACEPOINT, name="tp_hits")
    ml = links.attach_many(prog, tps, cookies=list(range(len(tps))))
    t_attach = time.perf_counter()
    subprocess.run(workload, check=True, stdout=subprocess.PIPE)
    t_work = time.perf_counter()
    ml.close()
    t_detach = time.perf_counter()
    vals = read_counts(counts, len(tps))
    prog.close()
    counts.close()
    return {
        "mechanism": ml.mechanism, "links": len(ml.links), "wall_s": t_detach - t0,
        "phases_s": {"attach": t_attach - t0, "workload": t_work - t_attach, "detach_parallel": t_detach - t_work},
        "counts": {tp.split(":", 1)[1]: v for tp, v in zip(tps, vals, strict=True) if v},
    }  # fmt: skip


def run_peer(workload: list[str]) -> tuple[float, dict[str, int], int]:
    prog = f'tracepoint:syscalls:sys_enter_* /comm == "{COMM}"/ {{ @[probe] = count(); }}'
    return run_bpftrace(prog, workload, r"@\[tracepoint:syscalls:(sys_enter_\w+)\]: (\d+)$")


def compare(a: dict[str, int], b: dict[str, int]) -> dict[str, tuple[int, int]]:
    return {k: (a.get(k, 0), b.get(k, 0)) for k in sorted(set(a) | set(b)) if a.get(k, 0) != b.get(k, 0)}


def main() -> int:
    missing = missing_root_or_bpftrace()
    if missing:
        print(missing, file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="bpfmux-bench-") as tmp:
        workload = make_workload(Path(tmp))
        ours_wall, ours = run_ours_child(__file__, workload)
        peer_wall, peer_counts, peer_probes = run_peer(workload)
        variant = ours_perf_event_variant(workload)
    diffs = compare(ours["counts"], peer_counts)
    vdiffs = compare(variant["counts"], peer_counts)
    ratio = peer_wall / ours_wall
    identical = not diffs and not ours["unmapped_syscalls"]
    result = {
        "name": NAME,
        "unit": "wall seconds of one tool run: attach + workload + detach (lower is better); ratio = peer / ours",
        "workload": f"{COMM} = GNU find /usr/include -type f (output to a pipe), one run per tool",
        "ours": {"wall_s": ours_wall, **{k: v for k, v in ours.items() if k != "counts"}},
        "peer": {"tool": "bpftrace", "wall_s": peer_wall, "probes": peer_probes},
        "ratio": ratio,
        "ours_perf_event_variant": {**{k: v for k, v in variant.items() if k != "counts"},
                                    "ratio_vs_peer": peer_wall / variant["wall_s"],
                                    "identical_counts": not vdiffs, "differences": vdiffs},  # fmt: skip
        "counts": {"total_ours": sum(ours["counts"].values()), "total_peer": sum(peer_counts.values()),
                   "syscalls": len(ours["counts"]), "identical": identical, "differences": diffs,
                   "per_tracepoint": ours["counts"]},  # fmt: skip
    }
    write_result(NAME, result)
    ph = ", ".join(f"{k}={v * 1000:.0f}ms" for k, v in ours["phases_s"].items())
    print(f"bpfmux: 1 raw tracepoint link on sys_enter, phases {ph}")
    print(f"bpftrace: {peer_probes} probes")
    vph = ", ".join(f"{k}={v:.2f}s" for k, v in variant["phases_s"].items())
    print(f"bpfmux, tracepoint program on {variant['links']} perf-event links: {variant['wall_s']:.2f}s ({vph}), "
          f"identical={not vdiffs}")  # fmt: skip
    print(f"counts: ours={result['counts']['total_ours']} peer={result['counts']['total_peer']} over "
          f"{len(ours['counts'])} syscalls, identical={identical}"
          + (f" differences={diffs} unmapped={ours['unmapped_syscalls']}" if not identical else ""))  # fmt: skip
    print(f"{NAME}: ours={ours_wall:.3f}s peer={peer_wall:.2f}s ratio={ratio:.1f} (wall seconds, lower is better)")
    return 0


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "--ours-child":
        ours_child(sys.argv[2:])
        sys.exit(0)
    sys.exit(main())

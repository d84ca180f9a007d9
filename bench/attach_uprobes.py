"""One program on every ``str*`` function of libc: bpfmux (one uprobe_multi
link) vs bpftrace (one uprobe perf event per function).

Both count hits per probed function, only for the workload process (its
command name is the unique ``bpfmuxwl``: a copy of ``ls`` listing
``/usr/include`` (long format) with ``LC_ALL=C`` into a pipe, which calls
libc's ``strcoll``, ``strftime``, the ``str*`` resolvers at start-up, …), and
the same workload runs once under each tool:

- peer: ``bpftrace -e 'uprobe:LIBC:str* /comm == "bpfmuxwl"/ { @[probe] =
  count(); }' -c WORKLOAD`` (bpftrace attaches, runs the workload, detaches);
- ours: a fresh ``python3`` process that resolves ``str*`` in libc's symbol
  tables (``.dynsym`` and the debug ``.symtab``, like bpftrace), loads one
  program (command-name filter in the kernel, count per BPF cookie), attaches
  it with one uprobe_multi link, runs the workload, detaches and reads the
  counts.

Figure: wall-clock seconds of each whole tool run (process start to exit:
attach + workload + detach; lower is better); ``ratio = peer / ours``. The
hit counts are compared function by function on the names both tools probed;
any difference is printed and recorded. Writes
``bench/results/attach_uprobes.json``.

Needs root, bpftrace. Usage: ``python3 bench/attach_uprobes.py``.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import comm_words, missing_root_or_bpftrace, run_bpftrace, run_ours_child, workload_copy, write_result

NAME = "attach_uprobes"
COMM = "bpfmuxwl"
GLOB = "str*"


WORK_ARGS = ["-l", "--time-style=long-iso", "/usr/include"]


def make_workload(tmp: Path) -> list[str]:
    """argv of the workload: a copy of ``ls`` whose command name is COMM."""
    return [str(workload_copy("ls", tmp, COMM)), *WORK_ARGS]


def build_program(map_fd: int) -> bytes:
    """Count per BPF cookie, only when the task's comm is COMM."""
    from bpfmux.isa.build import R0, R1, R2, R6, R7, R10, Asm
    from bpfmux.uapi import HelperId

    w0, w1 = comm_words(COMM)
    a = Asm()
    a.mov(R6, R1)
    a.mov(R1, R10).add(R1, -16).mov(R2, 16).call(HelperId.get_current_comm)
    a.ldxdw(R1, R10, -16).ld_imm64(R2, w0).jne(R1, R2, "out")
    a.ldxdw(R1, R10, -8).ld_imm64(R2, w1).jne(R1, R2, "out")
    a.mov(R1, R6).call(HelperId.get_attach_cookie).mov(R7, R0)
    a.stxw(R10, -20, R7)
    a.ld_map_fd(R1, "counts").mov(R2, R10).add(R2, -20).call(HelperId.map_lookup_elem)
    a.jeq(R0, 0, "out").mov(R1, 1).atomic_add(R0, 0, R1)
    a.label("out").mov(R0, 0).exit()
    return a.assemble().encode({"counts": map_fd})


def ours_child(workload: list[str]) -> None:
    """The measured bpfmux run (a process of its own, like bpftrace)."""
    t0 = time.perf_counter()
    from bpfmux.host.elfsyms import ElfSymbols
    from bpfmux.live import links
    from bpfmux.live import sys as lsys
    from bpfmux.uapi import AttachType, MapType, ProgType

    t_import = time.perf_counter()
    elf = ElfSymbols("libc.so.6")
    syms = elf.match(GLOB)
    t_syms = time.perf_counter()
    counts = lsys.map_create(MapType.ARRAY, 4, 8, len(syms), name="str_hits")
    prog = lsys.prog_load(ProgType.KPROBE, build_program(counts.fd), "GPL", name="str_hits",
                          expected_attach_type=AttachType.TRACE_UPROBE_MULTI)  # fmt: skip
    program = links.RawProgram(prog, ProgType.KPROBE, AttachType.TRACE_UPROBE_MULTI, name="str_hits")
    t_load = time.perf_counter()
    link = links.attach_many(program, [f"{elf.path}:{s.offset:#x}" for s in syms], cookies=list(range(len(syms))))
    t_attach = time.perf_counter()
    subprocess.run(workload, check=True, stdout=subprocess.PIPE)  # as under bpftrace -c: output to a pipe
    t_work = time.perf_counter()
    link.close()
    t_detach = time.perf_counter()
    out = bytearray(8)
    per_name: dict[str, int] = {}
    for i, s in enumerate(syms):
        lsys.map_lookup_elem(counts, struct.pack("<I", i), out)
        per_name[s.name] = per_name.get(s.name, 0) + struct.unpack("<Q", out)[0]
    program.close()
    counts.close()
    print(json.dumps({
        "mechanism": link.mechanism,
        "locations": len(syms),
        "names": len(per_name),
        "counts": per_name,
        "phases_s": {
            "imports": t_import - t0,
            "symbols": t_syms - t_import,
            "load": t_load - t_syms,
            "attach": t_attach - t_load,
            "workload": t_work - t_attach,
            "detach": t_detach - t_work,
        },
    }))  # fmt: skip


def run_peer(workload: list[str], libc: str) -> tuple[float, dict[str, int], int]:
    prog = f'uprobe:{libc}:{GLOB} /comm == "{COMM}"/ {{ @[probe] = count(); }}'
    return run_bpftrace(prog, workload, r"@\[uprobe:[^\]]*:([^:\]]+)\]: (\d+)$")


def main() -> int:
    missing = missing_root_or_bpftrace()
    if missing:
        print(missing, file=sys.stderr)
        return 2
    os.environ["LC_ALL"] = "C"  # the workload's locale, under both tools
    from bpfmux.host.ldcache import resolve_binary

    libc = resolve_binary("libc.so.6")
    with tempfile.TemporaryDirectory(prefix="bpfmux-bench-") as tmp:
        workload = make_workload(Path(tmp))
        ours_wall, ours = run_ours_child(__file__, workload)
        peer_wall, peer_counts, peer_probes = run_peer(workload, libc)
    ours_counts = ours["counts"]
    # bpftrace prints only probes that fired; a probed name missing there counted 0
    common = sorted(set(ours_counts))
    diffs = {n: (ours_counts[n], peer_counts.get(n, 0)) for n in common if ours_counts[n] != peer_counts.get(n, 0)}
    only_peer = sorted(set(peer_counts) - set(ours_counts))
    ratio = peer_wall / ours_wall
    result = {
        "name": NAME,
        "unit": "wall seconds of one tool run: attach + workload + detach (lower is better); ratio = peer / ours",
        "workload": f"{COMM} = ls -l /usr/include (LC_ALL=C, output to a pipe), one run per tool",
        "ours": {"wall_s": ours_wall, **{k: v for k, v in ours.items() if k != "counts"}},
        "peer": {"tool": "bpftrace", "wall_s": peer_wall, "probes": peer_probes},
        "ratio": ratio,
        "hits": {"total_ours": sum(ours_counts.values()), "total_peer": sum(peer_counts.values()),
                 "functions_hit": sum(1 for v in ours_counts.values() if v),
                 "identical": not diffs and not only_peer, "differences": diffs,
                 "fired_only_under_peer": only_peer, "per_function": ours_counts},  # fmt: skip
    }
    write_result(NAME, result)
    print(f"bpfmux: {ours['locations']} locations ({ours['names']} names) via {ours['mechanism']}, "
          f"phases {', '.join(f'{k}={v * 1000:.0f}ms' for k, v in ours['phases_s'].items())}")  # fmt: skip
    print(f"bpftrace: {peer_probes} probes")
    print(f"hits: ours={result['hits']['total_ours']} peer={result['hits']['total_peer']} "
          f"identical={result['hits']['identical']}" + (f" differences={diffs} only_peer={only_peer}" if diffs or only_peer
                                                        else ""))  # fmt: skip
    print(f"{NAME}: ours={ours_wall:.3f}s peer={peer_wall:.2f}s ratio={ratio:.1f} (wall seconds, lower is better)")
    return 0


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "--ours-child":
        os.environ["LC_ALL"] = "C"
        ours_child(sys.argv[2:])
        sys.exit(0)
    sys.exit(main())

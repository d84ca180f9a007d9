"""Loading the kernel's BTF: bpfmux vs bpftool.

ours: read /sys/kernel/btf/vmlinux, parse it (fresh, no cache) and look up
1000 functions by name with their full prototypes (argument names, types,
sizes) plus 100 struct layouts by name.
peer: ``bpftool btf dump file /sys/kernel/btf/vmlinux format raw > /dev/null``
(libbpf parses every type and bpftool prints each one).

Median wall time of several runs of each, both in this run. Writes
bench/results/btf_load.json; the last line is
``btf_load: ours=<ms> peer=<ms> ratio=<peer/ours>`` (milliseconds; ratio > 1
means bpfmux is faster).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _common import write_result
from bpfmux.btf import Btf
from bpfmux.btf.types import Composite, Func

VMLINUX = "/sys/kernel/btf/vmlinux"


def pick_names(n_funcs: int, n_structs: int) -> tuple[list[str], list[str]]:
    btf = Btf.parse(Path(VMLINUX).read_bytes())
    funcs = [t.name for t in btf if isinstance(t, Func)]
    structs = [t.name for t in btf if isinstance(t, Composite) and t.name]
    step_f = max(1, len(funcs) // n_funcs)
    step_s = max(1, len(structs) // n_structs)
    return funcs[::step_f][:n_funcs], structs[::step_s][:n_structs]


def ours(funcs: list[str], structs: list[str]) -> float:
    t0 = time.perf_counter()
    btf = Btf.parse(Path(VMLINUX).read_bytes(), source=VMLINUX)
    nargs = 0
    for name in funcs:
        sig = btf.func(name)
        nargs += sig.nargs + len(sig.arg_names) + sum(sig.arg_sizes)
    for name in structs:
        nargs += len(btf.fields(btf.find(name, "struct") if btf.find_ids(name, "struct") else btf.find(name), flatten=True))
    dt = time.perf_counter() - t0
    assert nargs > 0
    return dt


def peer() -> float:
    t0 = time.perf_counter()
    subprocess.run(["bpftool", "btf", "dump", "file", VMLINUX, "format", "raw"], stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    if not os.path.exists(VMLINUX):
        print(f"btf_load: {VMLINUX} missing (kernel without BTF); nothing to measure", file=sys.stderr)
        return 1
    funcs, structs = pick_names(1000, 100)
    ours(funcs, structs)  # warm the page cache and imports, as the peer's first run warms its binary
    peer()
    o = [ours(funcs, structs) for _ in range(args.runs)]
    p = [peer() for _ in range(args.runs)]
    om, pm = statistics.median(o) * 1000, statistics.median(p) * 1000
    result = {
        "name": "btf_load",
        "unit": "ms (median wall time)",
        "ours": round(om, 2),
        "peer": round(pm, 2),
        "ratio": round(pm / om, 3),
        "ours_runs_ms": [round(x * 1000, 2) for x in o],
        "peer_runs_ms": [round(x * 1000, 2) for x in p],
        "ours_does": f"parse {VMLINUX} + {len(funcs)} function prototypes + {len(structs)} struct layouts by name",
        "peer_does": "bpftool btf dump file /sys/kernel/btf/vmlinux format raw > /dev/null",
        "types": len(Btf.parse(Path(VMLINUX).read_bytes())) - 1,
    }
    write_result("btf_load", result)
    print(json.dumps(result, indent=2))
    print(f"btf_load: ours={om:.1f}ms peer={pm:.1f}ms ratio={pm / om:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

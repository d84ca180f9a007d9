#!/usr/bin/env python3
"""Per-call dispatch cost in the emulated kernel vs. the number of functions with their own programs.

20,000 functions carry one seed multi program (``BPF_F_MULTI_FUNC``, a real
eBPF program on bpfmux's VM); then 1 … 10,000 of them also get a fentry
program of their own. For each count and policy we time calls of a function
*without* own programs (the common case the seed cares about: "IPs[1-10]
will point to multi") and of one *with* own programs.

``clone`` (ours, the seed's design) should stay flat; ``filter`` (the
"bunch of cmp/jnz checks" the seed rejects) grows with the chain;
``per-function`` (mainline 2026) is flat too but builds one image per
function. The last line compares clone with filter at 10,000 functions
(microseconds per call; ratio = filter / clone, > 1: the seed's design wins).
"""

from __future__ import annotations

import gc
import sys
import time

from _common import write_result
from bpfmux.emu.kernel.emulator import Emulator
from bpfmux.isa.build import R0, Asm
from bpfmux.uapi import AttachType, ProgFlags, ProgType

NFUNCS = 20_000
COUNTS = [1, 10, 100, 1_000, 10_000]
POLICIES = ["clone", "filter", "per-function"]


def per_call_us(emu: Emulator, func, n: int) -> float:
    """Best of seven timings of ``n`` calls (a shared VM's neighbours slow whole stretches of a run), with the
    cyclic garbage collector off while timing, as ``timeit`` does: the collections that attaching thousands of
    programs schedules would land in whichever loop runs next (calls themselves leave no garbage)."""
    best = float("inf")
    gc.collect()
    gc.disable()
    try:
        for _ in range(7):
            t = time.perf_counter()
            for _ in range(n):
                emu.call(func, 1, 2)
            best = min(best, (time.perf_counter() - t) / n * 1e6)
    finally:
        gc.enable()
    return best


def run(policy: str) -> dict:
    emu = Emulator(btf=None, policy=policy)
    funcs = [emu.define(f"fn{i}", [8, 8], 8, lambda a, b: a + b) for i in range(NFUNCS)]
    ret0 = Asm().mov(R0, 0).exit().assemble().insns
    multi = emu.load_program(ret0, ProgType.TRACING, name="multi", attach_type=AttachType.TRACE_FENTRY,
                             flags=ProgFlags.MULTI_FUNC)
    own = emu.load_program(ret0, ProgType.TRACING, name="own", attach_type=AttachType.TRACE_FENTRY,
                           attach_target=funcs[0].name)
    emu.link_tracing_multi(multi, funcs)
    plain = funcs[-1]
    rows = []
    have = 0
    for k in COUNTS:
        t = time.perf_counter()
        while have < k:
            f = funcs[have]
            own.attach(f.name)  # the trampoline link, as for any fentry program (its target given here)
            have += 1
        setup = time.perf_counter() - t
        emu.policy.check_invariants()
        runs_before = multi.runs
        calls = 300 if (policy == "filter" and k >= 1000) else 3000
        us_plain = per_call_us(emu, plain, calls)
        us_own = per_call_us(emu, funcs[0], calls)
        assert multi.runs - runs_before == 2 * 7 * calls  # every call ran the multi program once
        rows.append({"own_functions": k, "us_plain": us_plain, "us_own": us_own, "setup_s": setup,
                     "images_built": emu.costs["images_built"], "image_bytes": emu.costs["image_bytes"]})
    emu.close()
    return {"rows": rows}


def main() -> int:
    results = {p: run(p) for p in POLICIES}
    print(f"{NFUNCS} functions under one multi program; µs per call of a function without / with own programs")
    header = f"{'own fns':>8} " + " ".join(f"{p + ' w/o':>16} {p + ' with':>17}" for p in POLICIES)
    print(header)
    for i, k in enumerate(COUNTS):
        cells = " ".join(f"{results[p]['rows'][i]['us_plain']:16.2f} {results[p]['rows'][i]['us_own']:17.2f}"
                         for p in POLICIES)
        print(f"{k:8d} {cells}")
    write_result("emu_dispatch", {"functions": NFUNCS, "counts": COUNTS, "results": results})
    clone = results["clone"]["rows"][-1]["us_plain"]
    filt = results["filter"]["rows"][-1]["us_plain"]
    first = results["clone"]["rows"][0]["us_plain"]
    print(f"clone at 1 vs 10,000 own functions: {first:.2f} vs {clone:.2f} µs/call (flat: x{clone / first:.2f})")
    print(f"emu_dispatch: ours={clone:.2f}us peer={filt:.2f}us ratio={filt / clone:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Instructions per second of the emulator's VM tiers beside the kernel's JIT.

Three programs, identical bytes for all three executors:

* ``alu_loop`` — 50,000 iterations of xorshift64 plus a masked multiply-add
  (mov, lsh, rsh, xor, and, mul, add, add32, a compare-and-branch): 16
  instructions per iteration.
* ``map_heavy`` — 2,000 iterations of: build a key on the stack, look it up in
  a 256-entry hash map, add to the value in place, store the running sum into
  an array map with ``bpf_map_update_elem``.
* ``helper_heavy`` — 2,000 iterations of four helper calls
  (``get_smp_processor_id``, ``get_current_pid_tgid``, ``get_prandom_u32``,
  ``ktime_get_ns``) folded into a register.

ours: the native tier (LLVM, when the ``native`` extra is installed), the
fast tier and, for reference, the checked tier of :class:`bpfmux.emu.VM`;
one-time translation and compilation are done before timing (compiled once,
cached); the native tier's compile time per program is in the JSON
(``native_compile_s``). Time is CPU time of this process
(``time.process_time``), best of several runs: the machine is shared and the
kernel's ``BPF_PROG_TEST_RUN`` duration also leaves out time the test run
was preempted.
peer: the kernel's JIT, ``BPF_PROG_TEST_RUN`` of the same program loaded as
``BPF_PROG_TYPE_SCHED_CLS`` with ``repeat`` (the kernel reports the mean
duration per run).

Translation: the fast tier's one-time translation and compilation of two
long programs, timed separately (wall clock, CPU time): ``r1 = -1`` then n ×
(``if r1 == i goto +1; r0 += 1``), one join point per pair, at 16,003 and
1,000,000 instructions (targets on a 2-core machine: under 1 s and under
60 s); the 16k one is the best of three runs by CPU time, and the load
average at the time is recorded (on a shared machine the wall clock can be
many times the CPU time); ``--no-million`` leaves out the second.

The instruction count of one run is the checked tier's exact count of
executed instructions; instructions/s = count / time per run. The kernel is
much faster (ratio < 1): it runs native code.

Writes bench/results/vm_speed.json; the last line is
``vm_speed: ours=<M insn/s> peer=<M insn/s> ratio=<ours/peer>`` for the ALU
loop (ours: the native tier, or the fast tier without llvmlite) (millions of BPF instructions per second; ratio > 1 would mean bpfmux is
faster). Needs root for the kernel part (``--no-kernel`` skips it).
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import sys
import time
from pathlib import Path

from bpfmux.emu import VM
from bpfmux.emu.vm import native
from bpfmux.isa.asm import assemble
from bpfmux.uapi import MapType

ALU_ITERS = 50_000
LOOP_ITERS = 2_000

ALU_LOOP = f"""
mov %r0, 0
mov %r1, 0
mov %r5, 0
lddw %r2, 0x123456789abcdef
loop:
mov %r3, %r2
lsh %r3, 13
xor %r2, %r3
mov %r3, %r2
rsh %r3, 7
xor %r2, %r3
mov %r3, %r2
lsh %r3, 17
xor %r2, %r3
mov %r4, %r2
and %r4, 0xffff
mul %r4, 31
add32 %r5, %r4
add %r0, %r2
add %r1, 1
jlt %r1, {ALU_ITERS}, loop
add %r0, %r5
exit
"""

MAP_HEAVY = f"""
mov %r6, 0
mov %r7, 0
loop:
mov %r1, %r6
and %r1, 255
stxw [%r10-4], %r1
lddw %r1, map_fd({{hash}})
mov %r2, %r10
add %r2, -4
call 1
jeq %r0, 0, skip
ldxdw %r1, [%r0]
add %r1, %r6
stxdw [%r0], %r1
add %r7, %r1
skip:
mov %r1, %r6
and %r1, 15
stxw [%r10-8], %r1
stxdw [%r10-16], %r7
lddw %r1, map_fd({{array}})
mov %r2, %r10
add %r2, -8
mov %r3, %r10
add %r3, -16
mov %r4, 0
call 2
add %r6, 1
jlt %r6, {LOOP_ITERS}, loop
mov %r0, %r7
exit
"""

HELPER_HEAVY = f"""
mov %r6, 0
mov %r7, 0
loop:
call 8
add %r7, %r0
call 14
xor %r7, %r0
call 7
add %r7, %r0
call 5
xor %r7, %r0
add %r6, 1
jlt %r6, {LOOP_ITERS}, loop
mov %r0, %r7
exit
"""


def _populate(hash_map, array_map, put) -> None:
    for k in range(256):
        put(hash_map, struct.pack("<I", k), struct.pack("<Q", k))
    for k in range(16):
        put(array_map, struct.pack("<I", k), bytes(8))


def _fresh_r0(source: str, tier: str) -> int:
    """r0 of one run on fresh maps (the programs change their maps)."""
    with VM() as vm:
        h = vm.create_map(MapType.HASH, 4, 8, 256, name="h")
        a = vm.create_map(MapType.ARRAY, 4, 8, 16, name="a")
        _populate(h, a, lambda m, k, v: m.__setitem__(k, v))
        vm.clock.set(1_000_000)
        return vm.load(assemble(source.format(hash=h.fd, array=a.fd))).run(bytes(64), tier=tier).r0


def ours(name: str, source: str, repeat: int) -> dict:
    """Run one program on both tiers; CPU seconds per run and the insn count."""
    out = {}
    with VM() as vm:
        h = vm.create_map(MapType.HASH, 4, 8, 256, name="h")
        a = vm.create_map(MapType.ARRAY, 4, 8, 16, name="a")
        _populate(h, a, lambda m, k, v: m.__setitem__(k, v))
        prog = vm.load(assemble(source.format(hash=h.fd, array=a.fd)), name=name)
        counted = prog.run(bytes(64), tier="checked")
        insns = counted.insns
        out["insns_per_run"] = insns
        out["first_r0"] = counted.r0 & 0xFFFFFFFF  # on fresh maps, to compare with the kernel's first run
        prog.run(bytes(64), tier="fast")  # translation and compilation happen here, once
        tiers = [("fast", repeat), ("checked", max(1, repeat // 10))]
        if native.available():
            t0 = time.perf_counter()
            ran = prog.run(bytes(64), tier="native")  # compiled here, once
            out["native_first_run_s"] = time.perf_counter() - t0
            code = native.native_code(prog)
            out["native_compile_s"] = code.seconds if code is not None else None
            out["native_ran_on"] = ran.tier
            # same result as the checked tier on fresh maps (helper_heavy reads prandom: equal seeds, equal values)
            out["native_r0_equal"] = _fresh_r0(source, "native") == _fresh_r0(source, "checked")
            tiers.insert(0, ("native", repeat * 10))
        for tier, reps in tiers:
            best = best_wall = float("inf")
            for _ in range(reps):
                t0, w0 = time.process_time(), time.perf_counter()
                prog.run(bytes(64), tier=tier)
                best = min(best, time.process_time() - t0)
                best_wall = min(best_wall, time.perf_counter() - w0)
            out[f"{tier}_s_per_run"] = best
            out[f"{tier}_minsn_per_s"] = insns / best / 1e6
            out[f"{tier}_minsn_per_s_wall"] = insns / best_wall / 1e6
    return out


def kernel(name: str, source: str, repeat: int) -> dict:
    """Load into the kernel (SCHED_CLS) and test-run with ``repeat``."""
    from bpfmux.isa.insn import encode
    from bpfmux.live import sys as lsys
    from bpfmux.uapi import ProgType

    h = lsys.map_create(MapType.HASH, 4, 8, 256, name="h")
    a = lsys.map_create(MapType.ARRAY, 4, 8, 16, name="a")
    try:
        _populate(h, a, lambda m, k, v: lsys.map_update_elem(m, k, v))
        insns = assemble(source.format(hash=h.fd, array=a.fd))
        fd = lsys.prog_load(ProgType.SCHED_CLS, encode(insns), "GPL", name=name[:15])
        try:
            first = lsys.prog_test_run(fd, data_in=bytes(64), data_size_out=64, repeat=1)
            res = lsys.prog_test_run(fd, data_in=bytes(64), data_size_out=64, repeat=repeat)
        finally:
            fd.close()
    finally:
        h.close()
        a.close()
    return {"ns_per_run": res.duration_ns, "retval": first.retval}


def chain(pairs: int, filler: int = 0) -> list:
    """``r1 = -1``; ``pairs`` × (``if r1 == i goto +1; r0 += 1``); ``filler`` × ``r2 = 0``; ``exit``."""
    from bpfmux.isa.insn import Insn

    out = [Insn(0xB7, 0), Insn(0xB7, 1, 0, 0, -1)]
    for i in range(pairs):
        out += [Insn(0x15, 1, 0, 1, i), Insn(0x07, 0, 0, 0, 1)]
    return out + [Insn(0xB7, 2)] * filler + [Insn(0x95)]


def translation(pairs: int, filler: int = 0) -> dict:
    """Time the fast tier's translation (and compilation) of :func:`chain`, then one run."""
    from bpfmux.emu.vm import translate

    insns = chain(pairs, filler)
    with VM(run_budget=1 << 40) as vm:
        prog = vm.load(insns)
        t0, w0 = time.process_time(), time.perf_counter()
        fns = translate.compile_program(prog)
        cpu, wall = time.process_time() - t0, time.perf_counter() - w0
        prog._fast = fns
        prog._fast_version = vm.code_version()
        w1 = time.perf_counter()
        r = prog.run(tier="fast")
        run = time.perf_counter() - w1
    if r.r0 != pairs:
        raise SystemExit(f"vm_speed: the {len(insns)}-instruction chain returned {r.r0}, not {pairs}")
    return {"insns": len(insns), "translate_s": wall, "translate_cpu_s": cpu, "first_run_s": run}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=10, help="timed runs per program and tier (best is kept)")
    ap.add_argument("--kernel-repeat", type=int, default=200, help="BPF_PROG_TEST_RUN repeat count")
    ap.add_argument("--no-kernel", action="store_true", help="skip the kernel (no root needed)")
    ap.add_argument("--no-million", action="store_true", help="skip the 1M-instruction translation")
    args = ap.parse_args()
    use_kernel = not args.no_kernel
    if use_kernel and os.geteuid() != 0:
        print("vm_speed: the kernel peer needs root; run as root or pass --no-kernel", file=sys.stderr)
        return 2
    results: dict[str, dict] = {}
    for name, src in (("alu_loop", ALU_LOOP), ("map_heavy", MAP_HEAVY), ("helper_heavy", HELPER_HEAVY)):
        r = ours(name, src, args.repeat)
        if use_kernel:
            k = kernel(name, src, args.kernel_repeat)
            r["kernel_ns_per_run"] = k["ns_per_run"]
            r["kernel_minsn_per_s"] = r["insns_per_run"] / k["ns_per_run"] * 1e3 if k["ns_per_run"] else None
            r["kernel_retval"] = k["retval"]
            if name != "helper_heavy" and k["retval"] != r["first_r0"]:  # helper_heavy reads clock and prandom
                print(f"vm_speed: result mismatch on {name}: kernel {k['retval']:#x} vs ours {r['first_r0']:#x}",
                      file=sys.stderr)
                return 1
            r["ratio_fast_to_kernel"] = r["fast_minsn_per_s"] / r["kernel_minsn_per_s"]
            if "native_minsn_per_s" in r:
                r["ratio_native_to_kernel"] = r["native_minsn_per_s"] / r["kernel_minsn_per_s"]
        results[name] = r
        kpart = f", kernel JIT {r['kernel_minsn_per_s']:.0f}" if use_kernel else ""
        npart = (f"native {r['native_minsn_per_s']:.1f} (compile {r['native_compile_s'] * 1e3:.0f} ms), "
                 if "native_minsn_per_s" in r else "native n/a (pip install bpfmux[native]), ")
        print(f"{name}: {r['insns_per_run']} insns/run; {npart}fast {r['fast_minsn_per_s']:.2f}, "
              f"checked {r['checked_minsn_per_s']:.2f}{kpart} M insn/s")
    trans = {}
    for pairs, filler, reps in ((8000, 0, 3),) + (() if args.no_million else ((499_998, 1, 1),)):
        # 16,003 (best of three: the machine is shared) and 1,000,000 instructions
        t = min((translation(pairs, filler) for _ in range(reps)), key=lambda t: t["translate_cpu_s"])
        t["load_average"] = os.getloadavg()[0]
        trans[str(t["insns"])] = t
        print(f"translation of {t['insns']} insns: {t['translate_s']:.2f} s (CPU {t['translate_cpu_s']:.2f} s), "
              f"first run {t['first_run_s']:.2f} s")
    out_dir = Path(__file__).resolve().parent / "results"
    out_dir.mkdir(exist_ok=True)
    payload = {"unit": "million BPF instructions per second (CPU time)", "python": sys.version.split()[0],
               "programs": results, "translation": trans}
    (out_dir / "vm_speed.json").write_text(json.dumps(payload, indent=2) + "\n")
    alu = results["alu_loop"]
    peer = alu.get("kernel_minsn_per_s")
    best = alu.get("native_minsn_per_s", alu["fast_minsn_per_s"])
    if peer:
        print(f"vm_speed: ours={best:.1f} peer={peer:.1f} ratio={best / peer:.5f}")
    else:
        print(f"vm_speed: ours={best:.1f} peer=n/a ratio=n/a")
    return 0


if __name__ == "__main__":
    sys.exit(main())

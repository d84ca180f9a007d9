"""Differential campaign: bpfmux's verifier and VM against the running kernel.

Valid programs of every class (:mod:`bpfmux.emu.vm.progen_cases`) and
invalid ones made by splicing one defect into a valid one
(:mod:`bpfmux.emu.vm.progen_defects`) are loaded by the kernel
(``BPF_PROG_LOAD``, the oracle) and verified by bpfmux; programs both
accept are test-run by the kernel and on both VM tiers, and return value and
context (every register and the stack, see :mod:`bpfmux.emu.vm.progen`)
must agree. Counted, per kind and in total:

* valid programs: kernel accepts / bpfmux accepts, value mismatches per tier;
* invalid programs: both reject (and with the same errno), kernel rejects but
  bpfmux accepts (the dangerous direction), kernel accepts but bpfmux rejects.

Run as root::

    PYTHONPATH=src python3 tests/data/verifier/campaign.py --valid 20000 --invalid 4000 --seed 1 \\
        --out /tmp/campaign.json

The JSON is rewritten every 500 programs, so a run stopped early still has
its counts. Runs over disjoint seed ranges (in parallel, one per core) are
combined with ``--merge a.json b.json … --out all.json``; the last full run's
figures are in ``bench/results/verifier_campaign.json``.

``tests/live/test_verifier_campaign.py`` runs it at a smaller count with
fixed seeds.
"""

from __future__ import annotations

import argparse
import errno
import json
import struct
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from bpfmux.emu.verifier.core import MapInfo, verify
from bpfmux.emu.vm.progen_cases import KINDS, ProgramCase, valid_case
from bpfmux.emu.vm.progen_defects import DEFECTS, invalid_case
from bpfmux.errors import BpfError, VerifierError
from bpfmux.isa.insn import encode
from bpfmux.uapi import ProgFlags, ProgType

__all__ = ["FAST_COMPILE_LIMIT", "Outcome", "Tally", "invalid_seed_case", "kernel_load", "merge", "ours", "rerun",
           "run_case", "run_campaign"]

M32 = 0xFFFFFFFF
#: the fast tier's translation failing on long straight-line code (Python's
#: parser nesting limit): a failure to run, counted apart from wrong values
FAST_COMPILE_LIMIT = "too many nested parentheses"


@dataclass
class Outcome:
    """What happened to one program: each verifier's errno (0: accepted) and last log line,
    and for accepted valid programs, a value mismatch per tier (``""``: none)."""

    kind: str
    defect: str
    dead: bool
    seed: int
    kernel_errno: int
    kernel_msg: str
    ours_errno: int
    ours_msg: str
    ours_seconds: float
    values: dict[str, str] = field(default_factory=dict)


def _last_line(log: str) -> str:
    lines = [x for x in log.strip().splitlines() if x and not x.startswith(("processed ", "verification time",
                                                                            "stack depth", "mark_precise"))]
    return lines[-1] if lines else ""


def _btf(case: ProgramCase):
    """BTF with a function per subprogram, and the func_info records (slot, type id)."""
    from bpfmux.btf.builder import BtfBuilder
    from bpfmux.uapi import FuncLinkage

    b = BtfBuilder()
    i32 = b.int("int", 4, signed=True)
    vp = b.ptr(0)
    main = b.func_proto(i32, [("ctx", vp)])
    cb = b.func_proto(i32, [("i", i32), ("c", vp)])
    recs = []
    for k, (slot, linkage) in enumerate(case.funcs or ()):
        fid = b.func(f"f{k}", main if k == 0 else cb, FuncLinkage.GLOBAL if linkage else FuncLinkage.STATIC)
        recs.append((slot, fid))
    return b.write(), b"".join(struct.pack("<II", s, t) for s, t in recs)


def kernel_load(case: ProgramCase, run: bool) -> tuple[int, str, tuple[int, bytes] | None]:
    """Load ``case`` into the kernel; returns (errno or 0, last log line, (retval, ctx) when ``run``)."""
    from bpfmux.live import sys as lsys

    fds = []
    btf_fd = None
    try:
        for t, k, v, n, f in case.maps:
            fds.append(lsys.map_create(t, k, v, n, flags=f))
        finfo = b""
        if case.funcs is not None:
            blob, finfo = _btf(case)
            btf_fd = lsys.btf_load(blob)
        code = encode(case.with_fds([int(x) for x in fds]))
        try:
            prog = lsys.prog_load(ProgType.SYSCALL, code, case.license, name="campaign",
                                  prog_flags=ProgFlags.SLEEPABLE if case.sleepable else 0,
                                  prog_btf_fd=btf_fd, func_info=finfo, func_info_rec_size=8)
        except VerifierError as e:
            return e.errno, _last_line(e.log), None
        except BpfError as e:
            return e.errno or errno.EINVAL, str(e).splitlines()[0], None
        try:
            if not run:
                return 0, "", None
            buf = bytearray(case.ctx)
            res = lsys.prog_test_run(prog, ctx_in=buf)
            return 0, "", (res.retval, bytes(buf))
        finally:
            prog.close()
    finally:
        for f in fds:
            f.close()
        if btf_fd is not None:
            btf_fd.close()


def ours(case: ProgramCase) -> tuple[int, str, float]:
    """bpfmux's verdict: (errno or 0, message, CPU seconds of this process: on a shared machine
    the wall time measures the load more than the verifier)."""
    maps = {i: MapInfo(t, k, v, n, f) for i, (t, k, v, n, f) in enumerate(case.maps)}
    t0 = time.process_time()
    try:
        verify(case.insns, ProgType.SYSCALL, maps=maps, flags=ProgFlags.SLEEPABLE if case.sleepable else 0,
               gpl="GPL" in case.license, func_info=case.funcs is not None)
    except VerifierError as e:
        return e.errno, _last_line(e.log), time.process_time() - t0
    return 0, "", time.process_time() - t0


def vm_values(case: ProgramCase, expect: tuple[int, bytes]) -> dict[str, str]:
    """Run ``case`` on both VM tiers; a description of each tier's mismatch (``""``: agrees)."""
    from bpfmux.emu import VM

    out = {}
    kret, kctx = expect
    for tier in ("checked", "fast"):
        try:
            with VM() as vm:
                ms = [vm.create_map(t, k, v, n, flags=f) for t, k, v, n, f in case.maps]
                prog = vm.load(case.with_fds([m.fd for m in ms]), prog_type=ProgType.SYSCALL)
                res = prog.run(case.ctx, tier=tier)
        except Exception as e:  # a VM failure is a mismatch, with its reason
            out[tier] = f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
            continue
        if res.r0 & M32 != kret or res.ctx != kctx:
            diff = next((i for i in range(len(kctx)) if res.ctx[i:i + 1] != kctx[i:i + 1]), -1)
            out[tier] = f"r0 {res.r0 & M32:#x} vs {kret:#x}, ctx differs at {diff}"
        else:
            out[tier] = ""
    return out


def run_case(case: ProgramCase, values: bool = True) -> Outcome:
    """Both verdicts for ``case`` and, for valid programs both accept, the VM values."""
    ke, kmsg, kres = kernel_load(case, run=values and not case.defect)
    oe, omsg, secs = ours(case)
    o = Outcome(case.kind, case.defect, case.dead, case.seed, ke, kmsg, oe, omsg, secs)
    if kres is not None and oe == 0:
        o.values = vm_values(case, kres)
    return o


class Tally:
    """Counts of a campaign (see the module docstring)."""

    def __init__(self) -> None:
        self.valid: dict[str, Counter] = defaultdict(Counter)
        self.invalid: dict[str, Counter] = defaultdict(Counter)
        self.examples: dict[str, list[dict]] = defaultdict(list)
        self.slowest: list[tuple[float, str]] = []
        self.disagreements: list[tuple[str, int]] = []  # (what, seed) of every disagreement and mismatch

    def add(self, o: Outcome) -> None:
        self.slowest.append((o.ours_seconds, f"{o.kind}/{o.defect or '-'} seed {o.seed}"))
        self.slowest = sorted(self.slowest, reverse=True)[:10]
        if not o.defect:
            c = self.valid[o.kind]
            c["programs"] += 1
            c["kernel_accepts"] += o.kernel_errno == 0
            c["ours_accepts"] += o.ours_errno == 0
            if o.kernel_errno == 0 and o.ours_errno:
                c["ours_rejects_kernel_accepts"] += 1
                self._example("valid_rejected", o)
            if o.kernel_errno and o.ours_errno == 0:
                c["ours_accepts_kernel_rejects"] += 1
                self._example("valid_kernel_rejects", o)
            for tier, bad in o.values.items():
                c[f"ran_{tier}"] += 1
                if bad:
                    c[f"mismatch_{tier}"] += 1
                    if FAST_COMPILE_LIMIT in bad:  # the fast tier's translation, not a value
                        c[f"mismatch_{tier}_compile_limit"] += 1
                    self._example(f"mismatch_{tier}", o)
            return
        key = o.defect + (" (dead code)" if o.dead else "")
        c = self.invalid[key]
        c["programs"] += 1
        if o.kernel_errno and o.ours_errno:
            c["both_reject"] += 1
            if o.kernel_errno == o.ours_errno:
                c["same_errno"] += 1
            else:
                self._example("errno", o)
        elif o.kernel_errno and not o.ours_errno:
            c["kernel_rejects_ours_accepts"] += 1
            self._example("dangerous", o)
        elif not o.kernel_errno and o.ours_errno:
            c["kernel_accepts_ours_rejects"] += 1
            self._example("safe", o)
        else:
            c["both_accept"] += 1

    def _example(self, what: str, o: Outcome) -> None:
        self.disagreements.append((what, o.seed))
        if len(self.examples[what]) < 40:
            self.examples[what].append(o.__dict__)

    def totals(self) -> dict[str, dict[str, int]]:
        v: Counter = Counter()
        for c in self.valid.values():
            v.update(c)
        i: Counter = Counter()
        for c in self.invalid.values():
            i.update(c)
        return {"valid": dict(v), "invalid": dict(i)}

    def table(self) -> str:
        lines = ["valid programs", f"{'kind':12s} {'n':>6s} {'k_acc':>6s} {'o_acc':>6s} {'o_rej_k_acc':>11s} "
                 f"{'mis_chk':>7s} {'mis_fast':>8s}"]
        for kind in sorted(self.valid):
            c = self.valid[kind]
            lines.append(f"{kind:12s} {c['programs']:6d} {c['kernel_accepts']:6d} {c['ours_accepts']:6d} "
                         f"{c['ours_rejects_kernel_accepts']:11d} {c['mismatch_checked']:7d} {c['mismatch_fast']:8d}")
        lines += ["", "invalid programs", f"{'defect':28s} {'n':>5s} {'both_rej':>8s} {'same_errno':>10s} "
                  f"{'k_rej_o_acc':>11s} {'k_acc_o_rej':>11s} {'both_acc':>8s}"]
        for d in sorted(self.invalid):
            c = self.invalid[d]
            lines.append(f"{d:28s} {c['programs']:5d} {c['both_reject']:8d} {c['same_errno']:10d} "
                         f"{c['kernel_rejects_ours_accepts']:11d} {c['kernel_accepts_ours_rejects']:11d} "
                         f"{c['both_accept']:8d}")
        t = self.totals()
        lines += ["", f"totals: {json.dumps(t)}"]
        return "\n".join(lines)


def run_campaign(n_valid: int, n_invalid: int, seed: int, values: bool = True, progress: bool = False,
                 checkpoint: Callable[[Tally], None] | None = None) -> Tally:
    """Run ``n_valid`` valid and ``n_invalid`` invalid programs from seeds ``seed``, ``seed + 1``, …;
    every 500 programs, ``checkpoint`` gets the counts so far."""
    tally = Tally()
    t0 = time.time()
    for k in range(n_valid):
        tally.add(run_case(valid_case(seed + k), values))
        if k % 500 == 499:
            if progress:
                print(f"valid {k + 1}/{n_valid} {time.time() - t0:.0f}s", file=sys.stderr, flush=True)
            if checkpoint is not None:
                checkpoint(tally)
    for k in range(n_invalid):
        tally.add(run_case(invalid_seed_case(seed + 1_000_000 + k), values))
        if k % 500 == 499:
            if progress:
                print(f"invalid {k + 1}/{n_invalid} {time.time() - t0:.0f}s", file=sys.stderr, flush=True)
            if checkpoint is not None:
                checkpoint(tally)
    return tally


def invalid_seed_case(s: int) -> ProgramCase:
    """The invalid program of campaign seed ``s`` (as :func:`run_campaign` makes it)."""
    return invalid_case(valid_case(s, KINDS[(s // len(DEFECTS)) % len(KINDS)]), s)


_VALID_LABELS = ("valid_rejected", "valid_kernel_rejects", "mismatch_checked", "mismatch_fast")


def rerun(result: dict, values: bool = True) -> Tally:
    """Run again every program a result (``--out`` JSON) counted as a disagreement or mismatch."""
    tally = Tally()
    for what, seed in sorted({(w, s) for w, s in result["disagreements"]}, key=lambda x: x[1]):
        case = valid_case(seed) if what in _VALID_LABELS else invalid_seed_case(seed)
        tally.add(run_case(case, values))
    return tally


def merge(parts: list[dict]) -> dict:
    """One result from the JSON results of several runs (disjoint seed ranges): counts summed."""
    out: dict = {"runs": [], "valid": defaultdict(Counter), "invalid": defaultdict(Counter),
                 "examples": defaultdict(list), "slowest": [], "disagreements": []}
    for p in parts:
        out["runs"] += p.get("runs", [])
        for side in ("valid", "invalid"):
            for k, c in p[side].items():
                out[side][k].update(c)
        for k, ex in p["examples"].items():
            out["examples"][k] = (out["examples"][k] + ex)[:40]
        out["slowest"] = sorted(out["slowest"] + [tuple(x) for x in p["slowest"]], reverse=True)[:10]
        out["disagreements"] += p["disagreements"]
    totals = {}
    for side in ("valid", "invalid"):
        t: Counter = Counter()
        for c in out[side].values():
            t.update(c)
        totals[side] = dict(t)
    return {"totals": totals, **out}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--valid", type=int, default=1000)
    ap.add_argument("--invalid", type=int, default=300)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-values", action="store_true", help="compare verdicts only")
    ap.add_argument("--out", help="write counts and examples as JSON")
    ap.add_argument("--merge", nargs="+", metavar="JSON", help="merge the JSON results of several runs into --out")
    ap.add_argument("--rerun", metavar="JSON", help="run again the disagreements and mismatches of a result")
    args = ap.parse_args()
    if args.rerun:
        with open(args.rerun) as f:
            again = rerun(json.load(f), not args.no_values)
        print(again.table())
        if args.out:
            with open(args.out, "w") as f:
                json.dump({"totals": again.totals(), "valid": again.valid, "invalid": again.invalid,
                           "examples": again.examples, "disagreements": again.disagreements}, f, indent=1,
                          default=str)
        return
    if args.merge:
        parts = []
        for path in args.merge:
            with open(path) as f:
                parts.append(json.load(f))
        merged = merge(parts)
        print(json.dumps(merged["totals"], indent=1))
        if args.out:
            with open(args.out, "w") as f:
                json.dump(merged, f, indent=1, default=str)
        return
    t0 = time.time()

    def write(tally: Tally) -> None:
        if not args.out:
            return
        import os

        counts = tally.totals()
        run = {"valid": counts["valid"].get("programs", 0), "invalid": counts["invalid"].get("programs", 0),
               "seed": args.seed, "values": not args.no_values, "seconds": round(time.time() - t0),
               "kernel": os.uname().release}
        with open(args.out + ".tmp", "w") as f:
            json.dump({"runs": [run], "totals": counts, "valid": tally.valid, "invalid": tally.invalid,
                       "examples": tally.examples, "slowest": tally.slowest,
                       "disagreements": tally.disagreements}, f, indent=1, default=str)
        os.replace(args.out + ".tmp", args.out)

    tally = run_campaign(args.valid, args.invalid, args.seed, not args.no_values, progress=True, checkpoint=write)
    print(tally.table())
    print("slowest (ours):", tally.slowest[:5])
    write(tally)

if __name__ == "__main__":
    main()

"""Time bpfmux's verifier beside the running kernel's, program by program.

Programs: every program of ``tests/bpf/*.bpf.o`` and of the libbpf-tools
corpus (``shared/corpus/libbpf-tools/obj/*.bpf.o`` next to the checkouts, or
``--corpus DIR``) that this kernel loads. Each is loaded by the kernel with
the verifier's statistics (``log_level`` 4); the kernel's time is the
``verification time N usec`` of its log. Ours is the time of
:meth:`bpfmux.emu.verifier.objects.PreparedProgram.verify` alone (the ELF
parse and relocation are done before, as the kernel's figure also leaves out
what libbpf did). Both are the best of ``--repeat`` runs (the machine is
shared); ours is CPU time of this process.

Writes ``bench/results/verifier_speed.json`` (per program: both times in
milliseconds, the instructions each verifier processed; the programs the
kernel does not load, with why; the programs over 1 s). The last line is
``verifier_speed: ours=<median ms> peer=<median ms> ratio=<peer/ours>``:
medians over the programs in milliseconds; ratio > 1 would mean bpfmux is
faster, 0.05 means 20 times slower. Needs root.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from _common import write_result  # noqa: E402
from bpfmux.btf import Btf  # noqa: E402
from bpfmux.emu.verifier.objects import prepare_program  # noqa: E402
from bpfmux.errors import BpfmuxError, VerifierError  # noqa: E402
from bpfmux.obj import load_object  # noqa: E402

LIMIT_S = 1.0


def corpus_dir(given: str | None) -> Path | None:
    """The libbpf-tools objects: ``given``, else ``shared/corpus/libbpf-tools/obj`` beside a parent of the checkout."""
    if given:
        return Path(given)
    for parent in ROOT.parents:
        d = parent / "shared" / "corpus" / "libbpf-tools" / "obj"
        if d.is_dir():
            return d
    return None


def kernel_time(path: str, prog: str, pin_root: str) -> tuple[float | None, int, str]:
    """(verification time in ms, instructions processed, "") when the kernel loads ``prog``, else (None, 0, why)."""
    from bpfmux.live.kernel import LiveKernel

    try:
        coll = LiveKernel(pin_root=pin_root).load(path, programs=[prog], log_level=4)
    except (BpfmuxError, OSError) as err:
        return None, 0, f"{type(err).__name__}: {str(err).strip().splitlines()[0][:120] if str(err).strip() else ''}"
    with coll:
        log = coll.programs[prog].log
    t = re.search(r"verification time (\d+) usec", log)
    n = re.search(r"processed (\d+) insns", log)
    if t is None:
        return None, 0, "no statistics in the log"
    return int(t.group(1)) / 1000, int(n.group(1)) if n else 0, ""


def our_time(path: str, prog: str, btf: Btf, repeat: int) -> tuple[float, int, str]:
    """(best CPU time of ``verify`` in ms, instructions processed, error or "")."""
    prepared = prepare_program(load_object(path), prog, btf)
    best, processed = float("inf"), 0
    for _ in range(repeat):
        t0 = time.process_time()
        try:
            res = prepared.verify(log_level=0)
        except VerifierError as err:
            lines = [x for x in err.log.strip().splitlines()
                     if x and not x.startswith(("processed ", "verification time", "stack depth"))]
            return (time.process_time() - t0) * 1000, 0, f"rejected (errno {err.errno}): {lines[-1] if lines else ''}"
        best = min(best, (time.process_time() - t0) * 1000)
        processed = res.insns_processed
        if best > 200:  # slow programs: one run says enough
            break
    return best, processed, ""


def main() -> None:
    """Run the benchmark (see the module docstring).

    :raises SystemExit: not root, or no program loaded.
    """
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", help="directory of libbpf-tools *.bpf.o")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", help="substring of object:program to run")
    args = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("verifier_speed needs root (the kernel loads the programs)")
    files = [("tests/bpf", f) for f in sorted((ROOT / "tests" / "bpf").glob("*.bpf.o"))]
    corpus = corpus_dir(args.corpus)
    if corpus is not None:
        files += [("libbpf-tools", f) for f in sorted(corpus.glob("*.bpf.o"))]
    btf = Btf.vmlinux()
    pin_root = tempfile.mkdtemp(prefix="bpfmux-vspeed-")
    rows, skipped, disagree = [], [], []
    for where, f in files:
        try:
            spec = load_object(str(f))
        except BpfmuxError as err:
            skipped.append({"object": f"{where}/{f.name}", "program": "*", "why": f"parse: {err}"})
            continue
        for prog in spec.programs:
            label = f"{where}/{f.name}:{prog}"
            if args.only and args.only not in label:
                continue
            peers = []
            why = ""
            k_insns = 0
            for _ in range(args.repeat):
                ms, k_insns, why = kernel_time(str(f), prog, pin_root)
                if ms is None:
                    break
                peers.append(ms)
            if not peers:
                skipped.append({"object": f"{where}/{f.name}", "program": prog, "why": why})
                continue
            ours_ms, o_insns, err = our_time(str(f), prog, btf, args.repeat)
            row = {"object": f"{where}/{f.name}", "program": prog, "ours_ms": round(ours_ms, 3),
                   "peer_ms": min(peers), "ours_insns": o_insns, "peer_insns": k_insns}
            if err:
                row["ours_error"] = err
                disagree.append(label)
            rows.append(row)
            print(f"{ours_ms:9.1f} ms {min(peers):7.3f} ms  {label}{'  ' + err if err else ''}", file=sys.stderr,
                  flush=True)
    if not rows:
        raise SystemExit("the kernel loaded no program")
    ours_med = statistics.median(r["ours_ms"] for r in rows)
    peer_med = statistics.median(r["peer_ms"] for r in rows)
    over = [f"{r['object']}:{r['program']}" for r in rows if r["ours_ms"] > LIMIT_S * 1000]
    result = {
        "unit": "ms",
        "programs": len(rows),
        "ours_median_ms": round(ours_med, 3),
        "peer_median_ms": round(peer_med, 3),
        "ratio_peer_over_ours": round(peer_med / ours_med, 4),
        "ours_max_ms": round(max(r["ours_ms"] for r in rows), 1),
        "over_1s": over,
        "ours_rejects_kernel_accepts": disagree,
        "rows": rows,
        "kernel_does_not_load": skipped,
    }
    out = write_result("verifier_speed", result)
    print(f"{len(rows)} programs; {len(skipped)} the kernel does not load; over 1 s: {over or 'none'}; "
          f"ours rejects: {disagree or 'none'}; wrote {out}")
    print("medians in ms per program; ratio = peer / ours (> 1: bpfmux faster)")
    print(f"verifier_speed: ours={ours_med:.2f} peer={peer_med:.3f} ratio={peer_med / ours_med:.4f}")


if __name__ == "__main__":
    main()

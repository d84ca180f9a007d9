"""Ring buffer consumer throughput: bpfmux (Python) vs a C libbpf consumer.

A producer saturates one CPU: a small C program (built here from the C source
below, linked with -lbpf) runs a BPF ``syscall`` program in a loop with
BPF_PROG_TEST_RUN; each run emits 64 events of 16 bytes (``u64 value, u64
seq``) with ``bpf_ringbuf_output`` and counts reservation failures (drops) in
an array map. The consumer runs on the other CPU:

- ours: :class:`bpfmux.live.ringbuf.RingBuffer` with numpy batch decoding
  (every event decoded into a structured array; the consumer sums ``seq`` so
  the decoded data is really used); the per-record callback mode
  (``struct.unpack`` per event) is measured too and reported in the JSON;
- peer: libbpf's ``ring_buffer__poll`` with a C callback that reads ``seq``.

Both consume the same map fed by the same producer for the same time. Figure:
events delivered to the consumer per second (decoded). Writes
``bench/results/ringbuf.json``; last line ``ringbuf: ours=… peer=… ratio=…``.

Needs root, clang/cc and libbpf-dev. Usage: ``python3 bench/ringbuf.py [--seconds 3]``.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from _common import write_result
from bpfmux.isa.insn import Insn, encode
from bpfmux.live import maps
from bpfmux.live import sys as bsys
from bpfmux.live.ringbuf import RingBuffer
from bpfmux.uapi import MapType, ProgFlags, ProgType

EVENTS_PER_RUN = 64
RING_SIZE = 16 << 20
EVENT = np.dtype([("value", "<u8"), ("seq", "<u8")])

C_SOURCE = r"""
/* bpfmux ringbuf benchmark helper: producer and libbpf consumer. */
#define _GNU_SOURCE
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void pin_cpu(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	sched_setaffinity(0, sizeof(set), &set);
}

struct totals { unsigned long long events, seq_sum; };

static int on_event(void *ctx, void *data, size_t size)
{
	struct totals *t = ctx;
	const unsigned long long *ev = data;
	t->events++;
	t->seq_sum += ev[1];
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: %s produce|consume PIN SECONDS CPU\n", argv[0]);
		return 2;
	}
	double secs = atof(argv[3]);
	pin_cpu(atoi(argv[4]));
	int fd = bpf_obj_get(argv[2]);
	if (fd < 0) {
		perror("bpf_obj_get");
		return 1;
	}
	if (!strcmp(argv[1], "produce")) {
		char ctx[8] = {0};
		LIBBPF_OPTS(bpf_test_run_opts, opts, .ctx_in = ctx, .ctx_size_in = sizeof(ctx));
		unsigned long long runs = 0;
		double end = now() + secs;
		while (now() < end) {
			for (int i = 0; i < 64; i++) {
				if (bpf_prog_test_run_opts(fd, &opts)) {
					perror("test_run");
					return 1;
				}
				runs++;
			}
		}
		printf("%llu\n", runs);
		return 0;
	}
	struct totals t = {0, 0};
	struct ring_buffer *rb = ring_buffer__new(fd, on_event, &t, NULL);
	if (!rb) {
		perror("ring_buffer__new");
		return 1;
	}
	double start = now(), end = start + secs;
	while (now() < end)
		ring_buffer__poll(rb, 50);
	ring_buffer__consume(rb);
	double took = now() - start;
	printf("%llu %.6f %llu\n", t.events, took, t.seq_sum);
	ring_buffer__free(rb);
	return 0;
}
"""


def producer_insns(ring_fd: int, drops_fd: int) -> bytes:
    """``syscall`` program: 64 x ringbuf_output({0x1234, i}); failures add 1 to drops[0]."""
    lddw, mov, movr, add, stx, st, call, jeq, atomic, exit_ = 0x18, 0xB7, 0xBF, 0x07, 0x7B, 0x62, 0x85, 0x15, 0xDB, 0x95
    out = [Insn(mov, 6, 0, 0, 0)]
    for _ in range(EVENTS_PER_RUN):
        out += [
            Insn(lddw, 1, 0, 0, 0x1234), Insn(stx, 10, 1, -16, 0), Insn(stx, 10, 6, -8, 0), Insn(add, 6, 0, 0, 1),
            Insn(lddw, 1, 1, 0, ring_fd), Insn(movr, 2, 10), Insn(add, 2, 0, 0, -16), Insn(mov, 3, 0, 0, 16),
            Insn(mov, 4, 0, 0, 0), Insn(call, 0, 0, 0, 130),
            Insn(jeq, 0, 0, 9, 0),  # ok: skip the drop count (9 slots)
            Insn(st, 10, 0, -20, 0), Insn(lddw, 1, 1, 0, drops_fd), Insn(movr, 2, 10), Insn(add, 2, 0, 0, -20),
            Insn(call, 0, 0, 0, 1), Insn(jeq, 0, 0, 2, 0), Insn(mov, 1, 0, 0, 1), Insn(atomic, 0, 1, 0, 0),
        ]
    out += [Insn(mov, 0, 0, 0, 0), Insn(exit_)]
    return encode(out)


def build_helper(workdir: Path) -> Path:
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        raise SystemExit("ringbuf bench: no C compiler (cc/gcc/clang) to build the libbpf peer")
    src = workdir / "rb_bench.c"
    src.write_text(C_SOURCE)
    exe = workdir / "rb_bench"
    subprocess.run([cc, "-O2", "-o", str(exe), str(src), "-lbpf"], check=True)
    return exe


def drops_now(drops: maps.LiveMap) -> int:
    return int.from_bytes(drops[0], "little")


def run_ours(exe: Path, prog_pin: str, ring: maps.LiveMap, drops: maps.LiveMap, seconds: float,
             mode: str) -> dict:
    os.sched_setaffinity(0, {0})
    totals = {"events": 0, "seq_sum": 0}

    def on_batch(arr: np.ndarray) -> None:
        totals["events"] += len(arr)
        totals["seq_sum"] += int(arr["seq"].sum())

    unpack = struct.Struct("<QQ").unpack_from

    def on_event(rec: memoryview) -> None:
        totals["events"] += 1
        totals["seq_sum"] += unpack(rec)[1]

    if mode == "numpy":
        reader = RingBuffer(ring, dtype=EVENT, batch_callback=on_batch)
    else:
        reader = RingBuffer(ring, on_event, decode=lambda rec: rec)
    d0 = drops_now(drops)
    with reader:
        reader.consume()  # start from an empty buffer
        totals.update(events=0, seq_sum=0)
        prod = subprocess.Popen([str(exe), "produce", prog_pin, str(seconds), "1"], stdout=subprocess.PIPE, text=True)
        start = time.monotonic()
        end = start + seconds
        while time.monotonic() < end:
            reader.poll(0.05)
        reader.consume()
        took = time.monotonic() - start
        runs = int(prod.communicate()[0])
        reader.consume()
    return {"events": totals["events"], "seconds": took, "produced_runs": runs,
            "attempted": runs * EVENTS_PER_RUN, "drops": drops_now(drops) - d0,
            "events_per_s": totals["events"] / took, "seq_sum": totals["seq_sum"]}


def run_peer(exe: Path, prog_pin: str, map_pin: str, ring: maps.LiveMap, drops: maps.LiveMap, seconds: float) -> dict:
    with RingBuffer(ring, lambda ev: None) as r:
        r.consume()  # empty the buffer first
    d0 = drops_now(drops)
    cons = subprocess.Popen([str(exe), "consume", map_pin, str(seconds), "0"], stdout=subprocess.PIPE, text=True)
    time.sleep(0.05)
    prod = subprocess.Popen([str(exe), "produce", prog_pin, str(seconds), "1"], stdout=subprocess.PIPE, text=True)
    runs = int(prod.communicate()[0])
    events, took, seq_sum = cons.communicate()[0].split()
    return {"events": int(events), "seconds": float(took), "produced_runs": runs,
            "attempted": runs * EVENTS_PER_RUN, "drops": drops_now(drops) - d0,
            "events_per_s": int(events) / float(took), "seq_sum": int(seq_sum)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=3.0)
    args = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("ringbuf bench: needs root (bpf(2))")
    if os.cpu_count() is None or os.cpu_count() < 2:
        raise SystemExit("ringbuf bench: needs 2 CPUs (producer and consumer on separate cores)")
    pin_dir = Path(f"/sys/fs/bpf/bpfmux_bench_{os.getpid()}")
    with tempfile.TemporaryDirectory() as tmp:
        exe = build_helper(Path(tmp))
        ring = maps.create(MapType.RINGBUF, 0, 0, RING_SIZE, name="bench_ring")
        drops = maps.create(MapType.ARRAY, 4, 8, 1, name="bench_drops")
        prog = bsys.prog_load(ProgType.SYSCALL, producer_insns(ring.fd, drops.fd),
                              prog_flags=ProgFlags.SLEEPABLE, name="bench_produce")
        pin_dir.mkdir()
        prog_pin, map_pin = str(pin_dir / "prog"), str(pin_dir / "ring")
        try:
            bsys.obj_pin(prog, prog_pin)
            bsys.obj_pin(ring.fd, map_pin)
            ours = run_ours(exe, prog_pin, ring, drops, args.seconds, "numpy")
            ours_cb = run_ours(exe, prog_pin, ring, drops, args.seconds, "callback")
            peer = run_peer(exe, prog_pin, map_pin, ring, drops, args.seconds)
        finally:
            for p in (prog_pin, map_pin):
                if os.path.exists(p):
                    os.unlink(p)
            pin_dir.rmdir()
            prog.close()
            ring.close()
            drops.close()
    ratio = ours["events_per_s"] / peer["events_per_s"]
    result = {
        "name": "ringbuf",
        "unit": "events/s delivered to the consumer (decoded)",
        "ours": ours,
        "ours_per_record_callback": ours_cb,
        "peer": peer,
        "peer_name": "libbpf ring_buffer__poll (C, -O2)",
        "ratio": ratio,
        "event_bytes": 16,
        "ring_bytes": RING_SIZE,
        "producer": f"BPF_PROG_TEST_RUN of a syscall program, {EVENTS_PER_RUN} bpf_ringbuf_output per run, CPU 1",
        "consumer_cpu": 0,
        "seconds": args.seconds,
        "kernel": platform.release(),
        "python": sys.version.split()[0],
    }
    write_result("ringbuf", result)
    print(f"ours (numpy batch): {ours['events_per_s']:,.0f} ev/s, drops {ours['drops']:,} of {ours['attempted']:,}")
    print(f"ours (per-record callback): {ours_cb['events_per_s']:,.0f} ev/s, drops {ours_cb['drops']:,} "
          f"of {ours_cb['attempted']:,}")
    print(f"peer (libbpf C): {peer['events_per_s']:,.0f} ev/s, drops {peer['drops']:,} of {peer['attempted']:,}")
    print(f"ringbuf: ours={ours['events_per_s']:.0f} peer={peer['events_per_s']:.0f} ratio={ratio:.2f} (events/s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

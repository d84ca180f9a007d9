"""What several benchmarks share: writing ``bench/results/NAME.json``, the
root/bpftrace precondition, and running the timed tool runs (our measured
child process, a ``bpftrace -e … -c WORKLOAD`` run) of the attach benchmarks.

Imports nothing from bpfmux, so that a measured child process that imports
this module starts its clock before any bpfmux import.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def write_result(name: str, result: Any) -> Path:
    """Write ``result`` as ``bench/results/NAME.json`` (indented, newline at the end)."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"{name}.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    return out


def missing_root_or_bpftrace() -> str | None:
    """Why a bpftrace comparison cannot run here (``None`` when it can)."""
    if os.geteuid() != 0:
        return "needs root"
    if shutil.which("bpftrace") is None:
        return "needs bpftrace"
    return None


def workload_copy(tool: str, directory: Path, comm: str) -> Path:
    """A copy of ``tool`` (found on PATH, else ``/usr/bin/TOOL``) named
    ``comm``, so both tools can filter the workload by command name."""
    exe = directory / comm
    shutil.copy2(shutil.which(tool) or f"/usr/bin/{tool}", exe)
    return exe


def comm_words(comm: str) -> tuple[int, int]:
    """``comm`` as the two little-endian u64 words of a 16-byte ``task->comm``."""
    return struct.unpack("<QQ", comm.encode().ljust(16, b"\0"))


def run_ours_child(script: str, workload: list[str]) -> tuple[float, dict]:
    """Run ``python3 SCRIPT --ours-child WORKLOAD…`` (a process of its own,
    like bpftrace); returns its wall seconds and the JSON of its last line."""
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, script, "--ours-child", *workload], capture_output=True, text=True)
    wall = time.perf_counter() - t
    if proc.returncode:
        raise SystemExit(f"bpfmux run failed:\n{proc.stderr}")
    return wall, json.loads(proc.stdout.strip().splitlines()[-1])


def run_bpftrace(program: str, workload: list[str], hit: str) -> tuple[float, dict[str, int], int]:
    """Run ``bpftrace -e PROGRAM -c WORKLOAD``; returns its wall seconds, the
    counts of its printed map (``hit`` matches one output line, group 1 the
    key and group 2 the count) and how many probes it said it attached
    (-1 when it did not say)."""
    t = time.perf_counter()
    proc = subprocess.run(["bpftrace", "-e", program, "-c", " ".join(workload)], capture_output=True, text=True)
    wall = time.perf_counter() - t
    if proc.returncode:
        raise SystemExit(f"bpftrace failed:\n{proc.stderr}")
    m = re.search(r"Attaching (\d+) probes", proc.stdout + proc.stderr)
    counts = {}
    for line in proc.stdout.splitlines():
        found = re.match(hit, line.strip())
        if found:
            counts[found.group(1)] = int(found.group(2))
    return wall, counts, int(m.group(1)) if m else -1

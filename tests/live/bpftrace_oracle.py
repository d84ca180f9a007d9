"""Run a script under bpftrace 0.17 (the oracle) and under ``bpfmux bpftrace``
at the same time, on one workload, and compare what they print.

Both tracers start; once each has printed its ``BEGIN`` output (which both
print only after every probe is attached) the workload runs; then both get
SIGINT, print their maps and exit. Lines of other processes (the machine
is shared) are filtered out by the caller, usually by the workload's pid or
a marker in its arguments.
"""

from __future__ import annotations

import os
import re
import select
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BPFMUX = [sys.executable, "-m", "bpfmux.cli.main", "bpftrace"]


def bpftrace_missing() -> str | None:
    """Why the oracle cannot run here (``None`` when it can)."""
    if os.geteuid() != 0:
        return "needs root to run bpftrace and bpfmux bpftrace"
    if shutil.which("bpftrace") is None:
        return "needs bpftrace (the oracle) on PATH"
    return None


@dataclass
class Run:
    """One tracer's run."""

    name: str
    stdout: str
    stderr: str
    status: int


class _Tracer:
    def __init__(self, name: str, argv: list[str], env: dict[str, str]) -> None:
        self.name = name
        self.p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=ROOT)
        self.buf = b""
        self.err = b""

    def read_until(self, pattern: re.Pattern[bytes], deadline: float) -> bool:
        assert self.p.stdout is not None and self.p.stderr is not None
        while not pattern.search(self.buf):
            left = deadline - time.monotonic()
            if left <= 0 or self.p.poll() is not None and not self._pending():
                return bool(pattern.search(self.buf))
            r, _, _ = select.select([self.p.stdout, self.p.stderr], [], [], min(left, 0.2))
            for f in r:
                chunk = os.read(f.fileno(), 65536)
                if f is self.p.stdout:
                    self.buf += chunk
                else:
                    self.err += chunk
        return True

    def _pending(self) -> bool:
        assert self.p.stdout is not None
        r, _, _ = select.select([self.p.stdout], [], [], 0)
        return bool(r)

    def stop(self, timeout: float) -> Run:
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGINT)
        try:
            out, err = self.p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            out, err = self.p.communicate()
        return Run(self.name, (self.buf + out).decode(errors="replace"), (self.err + err).decode(errors="replace"),
                   self.p.returncode)


def run_both(script: str | Path, workload: Callable[[], object], *, ready: str, params: tuple[str, ...] = (),
             settle: float = 0.5, attach_timeout: float = 120.0, stop_timeout: float = 120.0,
             extra: tuple[str, ...] = ()) -> tuple[Run, Run, object]:
    """Start both tracers on ``script`` (a path, or program text for ``-e``), wait
    until each printed ``ready`` (a regex), run ``workload``, wait ``settle``
    seconds, stop both; returns (bpftrace's run, ours, the workload's result).

    :raises AssertionError: a tracer did not get ready or failed.
    """
    src = ["-e", str(script)] if not Path(str(script)).is_file() else [str(script)]
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT / "src")
    env.setdefault("BPFTRACE_MAX_PROBES", "100000")
    bt = _Tracer("bpftrace", ["bpftrace", *extra, *src, *params], env)
    ours = _Tracer("bpfmux", [*BPFMUX, *extra, *src, *params], env)
    pat = re.compile(ready.encode(), re.M)
    try:
        deadline = time.monotonic() + attach_timeout
        for t in (bt, ours):
            if not t.read_until(pat, deadline):
                raise AssertionError(f"{t.name} did not print {ready!r}; stdout {t.buf[-2000:]!r}, "
                                     f"stderr {t.err[-2000:]!r}")
        result = workload()
        time.sleep(settle)
    except BaseException:
        for t in (bt, ours):
            if t.p.poll() is None:
                t.p.kill()
                t.p.wait()
        raise
    runs = [t.stop(stop_timeout) for t in (bt, ours)]
    for r in runs:
        assert r.status == 0, f"{r.name} exited with {r.status}: {r.stderr[-3000:]}"
    return runs[0], runs[1], result


def maps_section(out: str) -> str:
    """What follows the ``\\n\\n`` bpftrace prints before its exit map dump."""
    head, sep, tail = out.rpartition("\n\n\n")
    return tail if sep else ""


def parse_maps(out: str) -> dict[str, str]:
    """``@name[key]`` → its value text (histograms: the bars' lines joined)."""
    result: dict[str, str] = {}
    current = None
    for line in out.splitlines():
        m = re.match(r"^(@[\w]*(?:\[.*\])?): ?(.*)$", line)
        if m:
            current = m.group(1)
            result[current] = m.group(2)
            continue
        if current is not None and (line.startswith(("[", "(", " ", "\t", "]")) and line.strip()):
            result[current] += "\n" + line
        else:
            current = None
    return result


def hist_counts(text: str) -> dict[str, int]:
    """A histogram's buckets → counts."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"^(\S.*?\))\s+(\d+) \|", line)
        if m:
            out[m.group(1)] = int(m.group(2))
    return out

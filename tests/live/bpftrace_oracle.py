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
import shutil
import signal
import subprocess
import sys
import threading
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


def _in_epoll_wait(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/wchan") as f:
            return f.read().strip() == "do_epoll_wait"
    except OSError:
        return False


def interrupt(p: subprocess.Popen, timeout: float) -> None:
    """SIGINT ``p`` and wait for its exit. bpftrace 0.17 notices a SIGINT that
    arrives outside ``epoll_wait`` only with its next event, so while it keeps
    waiting for events the signal is sent again (never while it detaches or prints)."""
    p.send_signal(signal.SIGINT)
    end = time.monotonic() + timeout
    idle = 0
    while time.monotonic() < end:
        try:
            p.wait(timeout=1.0)
            return
        except subprocess.TimeoutExpired:
            idle = idle + 1 if _in_epoll_wait(p.pid) else 0
            if idle >= 2:
                p.send_signal(signal.SIGINT)
                idle = 0
    p.kill()
    p.wait()


@dataclass
class Run:
    """One tracer's run."""

    name: str
    stdout: str
    stderr: str
    status: int


class _Tracer:
    """A tracer process whose stdout and stderr are read all the time (a full
    pipe would stall it and make it lose events)."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str]) -> None:
        self.name = name
        self.p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=ROOT)
        self.buf = b""
        self.err = b""
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self._pump, args=(self.p.stdout, "buf"), daemon=True),
                        threading.Thread(target=self._pump, args=(self.p.stderr, "err"), daemon=True)]  # fmt: skip
        for t in self.threads:
            t.start()

    def _pump(self, stream: object, attr: str) -> None:
        fd = stream.fileno()  # type: ignore[attr-defined]
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                return
            with self.lock:
                setattr(self, attr, getattr(self, attr) + chunk)

    def read_until(self, pattern: re.Pattern[bytes], deadline: float) -> bool:
        while time.monotonic() < deadline:
            with self.lock:
                if pattern.search(self.buf):
                    return True
            if self.p.poll() is not None:
                time.sleep(0.1)
                with self.lock:
                    return bool(pattern.search(self.buf))
            time.sleep(0.02)
        return False

    def stop(self, timeout: float) -> Run:
        interrupt(self.p, timeout)
        for t in self.threads:
            t.join(timeout=10)
        return Run(self.name, self.buf.decode(errors="replace"), self.err.decode(errors="replace"), self.p.returncode)


def run_both(script: str | Path, workload: Callable[[], object], *, ready: str, params: tuple[str, ...] = (),
             settle: float = 0.5, attach_timeout: float = 120.0, stop_timeout: float = 120.0,
             extra: tuple[str, ...] = (), ready_delay: float = 0.0) -> tuple[Run, Run, object]:
    """Start both tracers on ``script`` (a path, or program text for ``-e``), wait
    until each printed ``ready`` (a regex), run ``workload``, wait ``settle``
    seconds, stop both; returns (bpftrace's run, ours, the workload's result).
    ``ready_delay`` waits longer after ``ready`` (for programs without a
    ``BEGIN`` to announce that the probes are attached: both tracers print
    "Attaching N probes" just before attaching).

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
        time.sleep(ready_delay)
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
        m = re.match(r"^(\S.*?[\])])\s+(\d+) \|", line)
        if m:
            out[m.group(1)] = int(m.group(2))
    return out

"""The commands of examples/README.md, run against the live kernel and
compared with examples/expected/ where the output does not depend on the machine."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.usefixtures("root_required")

ROOT = Path(__file__).resolve().parent.parent.parent
EX = ROOT / "examples"
BPFMUX = [sys.executable, "-m", "bpfmux.cli.main"]


def run(*args: str) -> str:
    r = subprocess.run([*BPFMUX, *args], capture_output=True, text=True, timeout=90, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    return r.stdout


def workload(name: str, n: int) -> str:
    return f"{sys.executable} examples/workloads/{name} {n}"


def test_trace_getpid_matches_expected():
    out = run("trace", "t:syscalls:sys_enter_getpid", "-c", workload("getpid.py", 5))
    assert out == (EX / "expected" / "trace_getpid.txt").read_text()


def test_trace_latency_calls_match_expected():
    out = run("trace", "uprobe:libc:strverscmp", "--latency", "-c", workload("strverscmp.py", 100))
    expected = (EX / "expected" / "trace_latency.txt").read_text()
    head = re.compile(r"^(@ns\[[^\]]+\]: \d+ calls)")
    assert head.match(out).group(1) == head.match(expected).group(1)


def test_run_getpid_events_matches_expected():
    out = run("run", "examples/objects/getpid_events.bpf.o", "--pid-var", "target_tgid", "-c",
              workload("getpid.py", 3))
    out = re.sub(r"pid: \d+", "pid: <PID>", out)
    out = re.sub(r"tid: \d+", "tid: <TID>", out)
    assert out == (EX / "expected" / "run_getpid_events.txt").read_text()


def test_run_syscount_getpid_row():
    out = run("run", "examples/objects/syscount.bpf.o", "--pid-var", "target_tgid", "-c", workload("getpid.py", 5))
    assert "calls_by_nr:" in out and "\n  39: 5\n" in out
    assert "  39: 5\n" in (EX / "expected" / "run_syscount.txt").read_text()


def test_run_json_and_set():
    out = run("run", "tests/bpf/getpid.bpf.o", "--pid-var", "target_tgid", "--json", "-c", workload("getpid.py", 7))
    import json

    maps = {d["map"]: d["items"] for d in map(json.loads, out.splitlines())}
    assert dict(maps[".bss"])["getpid_calls"] == 7
    assert sum(maps["getpid_percpu"][0][1]) == 7


def test_run_errors_one_line():
    r = subprocess.run([*BPFMUX, "run", "tests/bpf/getpid.bpf.o", "--set", "nosuchvar=1"], capture_output=True,
                       text=True, timeout=60, cwd=ROOT)
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "no read-only global" in r.stderr
    r = subprocess.run([*BPFMUX, "run", "/nonexistent.o"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "no such file" in r.stderr and "Traceback" not in r.stderr


def test_run_help_has_examples():
    out = run("run", "--help")
    assert "examples:" in out and "bpfmux run" in out


def test_example_objects_are_fresh(tmp_path):
    """The committed objects equal a rebuild with examples/build.sh's flags."""
    import shutil

    if shutil.which("clang") is None or shutil.which("llvm-strip") is None:
        pytest.skip("clang/llvm-strip not installed")
    work = tmp_path / "examples"
    shutil.copytree(EX, work)
    (tmp_path / "tests" / "bpf").mkdir(parents=True)
    shutil.copytree(ROOT / "tests" / "bpf" / "include", tmp_path / "tests" / "bpf" / "include")
    for o in (work / "objects").glob("*.o"):
        o.unlink()
    subprocess.run(["bash", str(work / "build.sh")], check=True, timeout=120)
    for src in (EX / "objects").glob("*.bpf.o"):
        assert (work / "objects" / src.name).read_bytes() == src.read_bytes(), src.name


def test_run_perf_buffer_events_decoded():
    import json

    out = run("run", "examples/objects/getpid_perf.bpf.o", "--pid-var", "target_tgid", "--json", "-c",
              workload("getpid.py", 4))
    recs = [json.loads(line) for line in out.splitlines()]
    samples = [r for r in recs if r.get("map") == "samples" and "event" in r]
    assert [s["event"]["seq"] for s in sorted(samples, key=lambda s: s["event"]["seq"])] == [0, 1, 2, 3]
    assert all(s["event"]["cpu"] == s["cpu"] for s in samples)  # the sample came through its CPU's ring
    bss = next(r for r in recs if r.get("map") == ".bss")
    assert dict(bss["items"])["samples_sent"] == 4

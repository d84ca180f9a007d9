"""What a bpftrace user expects of ``bpfmux trace``: every alias of a libc
function is a probe of its own, kernel stacks start at the tracepoint, ``-c``
counts the command and not the helper that starts it, final tables end with
the busiest rows, probes can be listed, and hints name commands, not Python."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys

import pytest

pytestmark = pytest.mark.usefixtures("root_required")

BPFMUX = [sys.executable, "-m", "bpfmux.cli.main"]


def bpfmux(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*BPFMUX, *args], capture_output=True, text=True, timeout=120)


def py(code: str) -> str:
    return f"{sys.executable} -c {shlex.quote(code)}"


def test_uprobe_aliases_are_each_a_probe() -> None:
    # strtol, strtoll, strtoq and strtoimax are one address in glibc; bpftrace attaches and counts each name
    code = "import ctypes\nf = ctypes.CDLL('libc.so.6').strtoll\nfor _ in range(7): f(b'12', None, 10)"
    r = bpfmux("trace", "uprobe:libc:strto*", "--json", "-c", py(code))
    assert r.returncode == 0, r.stderr
    rows = {d["probe"].rsplit(":", 1)[1]: d["count"] for d in map(json.loads, r.stdout.splitlines())}
    counts = {rows.get(n) for n in ("strtol", "strtoll", "strtoq", "strtoimax")}
    assert len(counts) == 1 and counts.pop() >= 7  # the same count for each name (the interpreter calls it too)


def test_kernel_stacks_start_at_the_tracepoint() -> None:
    r = bpfmux("trace", "t:sched:sched_switch", "--stacks", "-c", py("import time\nfor _ in range(3): time.sleep(0.01)"))
    assert r.returncode == 0, r.stderr
    frames = [line.strip() for line in r.stdout.splitlines() if line.startswith("    ")]
    assert frames and not any(f.startswith(("bpf_prog_", "bpf_trace_run")) for f in frames)
    firsts = re.findall(r"^@\[.*\]: \d+\n    (\S+)", r.stdout, re.M)
    assert firsts and all(f.startswith("__traceiter_sched_switch") for f in firsts)


def test_command_events_only_after_its_exec() -> None:
    r = bpfmux("trace", "t:syscalls:sys_enter_*", "t:syscalls:sys_exit_*", "--by", "comm", "--json", "-c", "/bin/true")
    assert r.returncode == 0, r.stderr
    comms = {d["comm"] for d in map(json.loads, r.stdout.splitlines())}
    assert comms == {"true"}  # not the helper (python3/bpfmux) that waited and then exec'd the command


def test_final_tables_print_the_busiest_rows_last() -> None:
    code = "import os\nfor _ in range(50): os.getpid()\nfor _ in range(5): os.getppid()"
    r = bpfmux("trace", "t:syscalls:sys_enter_getpid", "t:syscalls:sys_enter_getppid", "-c", py(code))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["PROBE", "COUNT"]
    assert [line.split()[1] for line in lines[1:]] == ["5", "50"]


def test_latency_histograms_print_the_busiest_last() -> None:
    code = ("import ctypes\nc = ctypes.CDLL('libc.so.6')\nfor _ in range(20): c.strverscmp(b'a1', b'a2')\n"
            "for _ in range(3): c.strcasestr(b'abc', b'b')")  # fmt: skip
    r = bpfmux("trace", "uprobe:libc:strverscmp", "uprobe:libc:strcasestr", "--latency", "-c", py(code))
    assert r.returncode == 0, r.stderr
    heads = re.findall(r"^@ns\[.*:(\w+)\]: (\d+) calls", r.stdout, re.M)
    assert heads == [("strcasestr", "3"), ("strverscmp", "20")]


def test_probes_are_listed_like_bpftrace_lists_them() -> None:
    r = bpfmux("trace", "-l", "tracepoint:syscalls:sys_enter_open*")
    assert r.returncode == 0, r.stderr
    assert "tracepoint:syscalls:sys_enter_openat" in r.stdout.splitlines()
    assert r.stdout.splitlines() == sorted(r.stdout.splitlines())
    r = bpfmux("trace", "-lv", "tracepoint:syscalls:sys_enter_openat")
    assert r.stdout.splitlines()[:3] == ["tracepoint:syscalls:sys_enter_openat", "    int __syscall_nr", "    int dfd"]


def test_hints_name_commands_not_python() -> None:
    r = bpfmux("trace", "uprobe:libc:no_such_function_xyz")
    assert r.returncode == 1
    assert "bpfmux trace -l uprobe:libc:*" in r.stderr and "ElfSymbols" not in r.stderr and "()" not in r.stderr

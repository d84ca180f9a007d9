"""``bpfmux trace`` against the live kernel: every count is checked against
what a child process the test controls did (N getpid() calls, N calls of a
libc function nothing else uses, one file opened by a unique name)."""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
import uuid

import pytest

pytestmark = pytest.mark.usefixtures("root_required")

BPFMUX = [sys.executable, "-m", "bpfmux.cli.main"]
TIMEOUT = 90


def bpfmux(*args: str, timeout: float = TIMEOUT) -> subprocess.CompletedProcess:
    return subprocess.run([*BPFMUX, *args], capture_output=True, text=True, timeout=timeout)


def py(code: str) -> str:
    """A -c command running ``code`` in a fresh python3."""
    return f"{sys.executable} -c {shlex.quote(code)}"


def getpids(n: int) -> str:
    return py(f"import os\nfor _ in range({n}): os.getpid()")


def strverscmp_calls(n: int) -> str:
    # strverscmp: a libc function that the interpreter itself never calls
    return py(f"import ctypes\nf = ctypes.CDLL('libc.so.6').strverscmp\nfor _ in range({n}): f(b'a1', b'a2')")


def json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def one_error_line(r: subprocess.CompletedProcess, status: int = 1) -> str:
    assert r.returncode == status, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, r.stderr
    return lines[0]


def test_count_getpid_equals_child_calls():
    r = bpfmux("trace", "tracepoint:syscalls:sys_enter_getpid", "--json", "-c", getpids(321))
    assert r.returncode == 0, r.stderr
    assert json_lines(r.stdout) == [{"probe": "tracepoint:syscalls:sys_enter_getpid", "count": 321}]
    assert "tracing 1 probe " in r.stderr


def test_all_syscalls_one_raw_tracepoint_and_exact_getpid():
    r = bpfmux("trace", "tracepoint:syscalls:sys_enter_*", "-v", "--json", "-c", getpids(200))
    assert r.returncode == 0, r.stderr
    assert "1 raw tracepoint (sys_enter) with an in-kernel filter on" in r.stderr
    rows = {d["probe"]: d["count"] for d in json_lines(r.stdout)}
    assert rows["tracepoint:syscalls:sys_enter_getpid"] == 200
    # the helper that becomes the command enters execve under its own name: not counted for the command
    assert "tracepoint:syscalls:sys_enter_execve" not in rows
    assert sum(rows.values()) > 200


def test_several_specs_and_plain_table():
    # two sys_enter specs share one program on sys_enter (two would each count every traced syscall)
    r = bpfmux("trace", "t:syscalls:sys_enter_getpid", "t:sched:sched_process_exec,t:syscalls:sys_exit_getpid",
               "t:syscalls:sys_enter_getppid", "-c", getpids(77))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["PROBE", "COUNT"]
    rows = {line.split()[0]: int(line.split()[1]) for line in lines[1:]}
    assert rows == {"tracepoint:syscalls:sys_enter_getpid": 77, "tracepoint:syscalls:sys_exit_getpid": 77,
                    "tracepoint:sched:sched_process_exec": 1}  # getppid: never called, no row


def test_by_comm_with_ctrl_c_and_comm_filter():
    name = "bpfmuxt" + uuid.uuid4().hex[:6]
    tracer = subprocess.Popen([*BPFMUX, "trace", "t:syscalls:sys_enter_getpid", "--by", "comm", "--comm", name,
                               "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = tracer.stderr.readline()
        assert "tracing 1 probe" in line, line
        code = f"open('/proc/self/comm', 'w').write({name!r})\nimport os\nfor _ in range(55): os.getpid()"
        subprocess.run([sys.executable, "-c", code], check=True, timeout=30)
        for _ in range(3):  # a process with another name: filtered out in the kernel
            os.getpid()
        tracer.send_signal(signal.SIGINT)
        out, err = tracer.communicate(timeout=TIMEOUT)
    finally:
        if tracer.poll() is None:
            tracer.kill()
    assert tracer.returncode == 0, err
    assert json_lines(out) == [{"probe": "tracepoint:syscalls:sys_enter_getpid", "count": 55, "comm": name}]


def test_by_pid():
    r = bpfmux("trace", "t:syscalls:sys_enter_getpid", "--by", "pid", "--json", "-c", getpids(12))
    assert r.returncode == 0, r.stderr
    rows = json_lines(r.stdout)
    assert len(rows) == 1 and rows[0]["count"] == 12 and rows[0]["pid"] > 1


def test_uprobe_glob_count_one_uprobe_multi_link():
    r = bpfmux("trace", "uprobe:libc:strverscm*", "-v", "--json", "-c", strverscmp_calls(40))
    assert r.returncode == 0, r.stderr
    assert "uprobe_multi, 1 functions in 1 link(s), pid filter in the link" in r.stderr
    rows = json_lines(r.stdout)
    assert [d["count"] for d in rows] == [40]
    assert rows[0]["probe"].endswith("libc.so.6:strverscmp")


def test_latency_uprobe_session_histogram():
    r = bpfmux("trace", "uprobe:libc:strverscmp", "--latency", "-v", "--json", "-c", strverscmp_calls(64))
    assert r.returncode == 0, r.stderr
    assert "uprobe session" in r.stderr
    (rec,) = json_lines(r.stdout)
    assert rec["calls"] == 64 and sum(b["count"] for b in rec["hist"]) == 64
    assert rec["total_ns"] > 0
    assert all(b["hi"] == 2 * b["lo"] or b["lo"] == 0 for b in rec["hist"])


def test_latency_text_bars_and_min_latency():
    r = bpfmux("trace", "uprobe:libc:strverscmp", "--latency", "-c", strverscmp_calls(10))
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("@ns[uprobe:/") and "10 calls" in r.stdout and "|@" in r.stdout
    r = bpfmux("trace", "uprobe:libc:strverscmp", "--latency", "--min-latency", "10s", "--json", "-c",
               strverscmp_calls(10))
    assert r.returncode == 0, r.stderr
    assert json_lines(r.stdout) == []  # nothing takes 10 s


def test_latency_of_syscalls_pairs():
    r = bpfmux("trace", "t:syscalls:sys_enter_getpid", "--latency", "--json", "-c", getpids(30))
    assert r.returncode == 0, r.stderr
    (rec,) = json_lines(r.stdout)
    assert rec["probe"] == "syscall:getpid" and rec["calls"] == 30


def test_args_openat_decodes_the_file_name():
    path = f"/tmp/bpfmux-args-{uuid.uuid4().hex}"
    code = f"try:\n    open({path!r})\nexcept FileNotFoundError:\n    pass"
    r = bpfmux("trace", "t:syscalls:sys_enter_openat", "t:syscalls:sys_exit_openat", "--args", "--json", "-c", py(code))
    assert r.returncode == 0, r.stderr
    events = json_lines(r.stdout)
    mine = [e for e in events if e["args"].get("filename") == path]
    assert len(mine) == 1
    assert mine[0]["probe"] == "tracepoint:syscalls:sys_enter_openat" and mine[0]["args"]["dfd"] == -100
    rets = [e["args"]["ret"] for e in events if e["probe"].endswith("sys_exit_openat")]
    assert -2 in rets  # ENOENT of that open


def test_args_tracepoint_record_text_line():
    r = bpfmux("trace", "t:sched:sched_process_exec", "--args", "-c", "/bin/true")
    assert r.returncode == 0, r.stderr
    (line,) = r.stdout.splitlines()
    assert "tracepoint:sched:sched_process_exec" in line and 'filename="/bin/true"' in line


def test_stacks_symbolized():
    # user frames are symbolized through /proc/PID/maps, read while the process lives (it sleeps a little)
    code = "import os, time\nfor _ in range(25): os.getpid()\ntime.sleep(0.5)"
    r = bpfmux("trace", "t:syscalls:sys_enter_getpid", "--stacks", "--json", "-c", py(code))
    assert r.returncode == 0, r.stderr
    recs = json_lines(r.stdout)
    assert sum(x["count"] for x in recs) == 25
    top = max(recs, key=lambda x: x["count"])
    assert any("syscall" in f for f in top["kernel_stack"]), top
    assert any("getpid" in f and "libc.so.6" in f for f in top["user_stack"]), top


def test_profile_sampling_runs():
    r = bpfmux("trace", "profile:hz:199", "software:cs:1", "-d", "0.5", "--json", "-v")
    assert r.returncode == 0, r.stderr
    assert "perf_event sampling on" in r.stderr
    rows = {d["probe"]: d["count"] for d in json_lines(r.stdout)}
    assert rows.get("profile:hz:199", 0) > 0


def test_duration_and_rawtracepoint():
    t0 = time.monotonic()
    r = bpfmux("trace", "rawtracepoint:sched_switch", "-d", "0.3", "--json")
    assert r.returncode == 0, r.stderr
    assert time.monotonic() - t0 < TIMEOUT
    rows = json_lines(r.stdout)
    assert rows and rows[0]["probe"] == "rawtracepoint:sched_switch" and rows[0]["count"] > 0


def test_prometheus_endpoint():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code = (f"import os, urllib.request\nfor _ in range(17): os.getpid()\n"
            f"print(urllib.request.urlopen('http://127.0.0.1:{port}/metrics').read().decode())")
    r = bpfmux("trace", "t:syscalls:sys_enter_getpid", "--prometheus", str(port), "--json", "-c", py(code))
    assert r.returncode == 0, r.stderr
    assert f"serving metrics at http://127.0.0.1:{port}/metrics" in r.stderr
    assert 'bpfmux_probe_hits_total{probe="tracepoint:syscalls:sys_enter_getpid"} 17' in r.stdout


# --- errors a newcomer meets: one line each, no traceback ------------------------------------


def test_kprobe_not_supported_here():
    if os.path.exists("/sys/bus/event_source/devices/kprobe/type"):
        pytest.skip("this kernel has kprobes; the VM tier covers them")
    line = one_error_line(bpfmux("trace", "kprobe:vfs_*"))
    assert "not supported by this kernel" in line and "tracepoint:" in line


def test_fentry_not_supported_here():
    from bpfmux.live.features import features
    from bpfmux.uapi import AttachType

    if features().attach_type(AttachType.TRACE_FENTRY).supported:
        pytest.skip("this kernel has fentry")
    line = one_error_line(bpfmux("trace", "fentry:vfs_read"))
    assert "not supported by this kernel" in line


def test_probe_matches_nothing():
    line = one_error_line(bpfmux("trace", "tracepoint:sched:no_such_event_*"))
    assert "matches no tracepoint" in line
    line = one_error_line(bpfmux("trace", "uprobe:libc:no_such_function_xyz*"))
    assert "matches nothing" in line


def test_bad_glob_and_bad_spec():
    # malformed specs are bad usage: status 2
    line = one_error_line(bpfmux("trace", "tracepoint:sched:sched_[abc"), 2)
    assert "bad glob" in line
    line = one_error_line(bpfmux("trace", "syscalls:sys_enter_read"), 2)
    assert "unknown probe kind" in line


def test_not_root(monkeypatch, capsys):
    # the interpreter lives under /root here, so an unprivileged user cannot start it: check in-process
    from bpfmux.cli import _common
    from bpfmux.cli.main import main

    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setattr(_common, "read_privileges", lambda: _common.Privileges(1000, 0, 2))  # nor capabilities
    assert main(["trace", "t:syscalls:sys_enter_getpid", "-d", "0"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "needs root" in err and "sudo" in err and "Traceback" not in err


def test_tracefs_not_mounted_is_mounted_for_you():
    # a private mount namespace: the machine's own tracefs mounts are not touched
    script = ("set -e; for m in /sys/kernel/debug/tracing /sys/kernel/debug /sys/kernel/tracing; do "
              "while mountpoint -q $m; do umount $m; done; done; "
              f"exec {' '.join(BPFMUX)} trace t:syscalls:sys_enter_getpid --json -c {shlex.quote(getpids(5))}")
    r = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script], capture_output=True,
                       text=True, timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr
    assert "tracefs was not mounted; mounted it on /sys/kernel/tracing" in r.stderr
    assert json_lines(r.stdout) == [{"probe": "tracepoint:syscalls:sys_enter_getpid", "count": 5}]


def test_command_not_found():
    line = one_error_line(bpfmux("trace", "t:syscalls:sys_enter_getpid", "-c", "/nonexistent/cmd"))
    assert "cannot run '/nonexistent/cmd'" in line and "no such command" in line


def test_help_has_examples():
    r = bpfmux("trace", "--help")
    assert r.returncode == 0 and "examples:" in r.stdout and "bpfmux trace 'tracepoint:syscalls:sys_enter_*'" in r.stdout


def test_interval_json_lines_when_not_a_terminal():
    r = bpfmux("trace", "rawtracepoint:sched_switch", "-i", "0.2", "-d", "0.7", "--json")
    assert r.returncode == 0, r.stderr
    rows = json_lines(r.stdout)
    periodic = [d for d in rows if "time" in d]
    assert len(periodic) >= 2 and rows[-1].keys() == {"probe", "count"}
    assert periodic[0]["count"] <= rows[-1]["count"]


def test_args_uprobe_and_uretprobe():
    r = bpfmux("trace", "uprobe:libc:strverscmp", "uretprobe:libc:strverscmp", "--args", "--json", "-c",
               strverscmp_calls(3))
    assert r.returncode == 0, r.stderr
    events = json_lines(r.stdout)
    entries = [e for e in events if e["probe"].startswith("uprobe:")]
    rets = [e for e in events if e["probe"].startswith("uretprobe:")]
    assert len(entries) == 3 and len(rets) == 3
    assert all(e["args"]["arg0"].startswith("0x") for e in entries)
    assert all(e["args"]["ret"] < 0 for e in rets)  # strverscmp("a1", "a2") < 0


def test_args_raw_tracepoint_typed_by_btf():
    r = bpfmux("trace", "rawtracepoint:sched_process_exec", "--args", "--json", "-c", "/bin/true")
    assert r.returncode == 0, r.stderr
    (ev,) = json_lines(r.stdout)
    assert ev["comm"] == "true" and ev["args"]["arg1"] == ev["pid"]  # (task, old_pid, bprm): old_pid is an int
    assert ev["args"]["arg0"].startswith("0xffff")

"""One error path for every subcommand: a malformed argument exits 2 with one
line, a runtime failure exits 1 with one line starting with ``bpfmux:``,
``--debug`` adds the traceback, Ctrl-C exits 130 and a closed pipe 0.

The CLI runs as a subprocess of this checkout's ``src``, as a user runs it."""

from __future__ import annotations

import errno
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BPF = ROOT / "tests" / "bpf"
OBJ = str(BPF / "fentry_test.bpf.o")
BPFMUX = [sys.executable, "-m", "bpfmux.cli.main"]
ENV = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
TIMEOUT = 120
NO_SUCH_PID = "999999999"  # above any pid_max (at most 2**22)


def bpfmux(*args: str, stdout: int | None = subprocess.PIPE, stdin: int | None = subprocess.DEVNULL,
           timeout: float = TIMEOUT) -> subprocess.CompletedProcess:  # fmt: skip
    return subprocess.run([*BPFMUX, *args], stdout=stdout, stderr=subprocess.PIPE, stdin=stdin, text=True,
                          timeout=timeout, env=ENV, cwd=ROOT)  # fmt: skip


def start(*args: str, **kw: object) -> subprocess.Popen:
    return subprocess.Popen([*BPFMUX, *args], stderr=subprocess.PIPE, text=True, env=ENV, cwd=ROOT, **kw)


def the_line(r: subprocess.CompletedProcess, status: int) -> str:
    """The one stderr line of a failed run with ``status``."""
    assert r.returncode == status, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("bpfmux: "), lines[0]
    return lines[0]


# --- exit status 2: what the user typed is malformed ------------------------------------------------

USAGE = {
    "btf": (["btf", "dump", "--format", "xml"], "invalid choice: 'xml'"),
    "conformance": (["conformance", "/nonexistent/cases"], "is not a directory of conformance cases"),
    "conformance-tier": (
        ["conformance", str(ROOT / "tests" / "data" / "conformance"), "--tier", "slow"],
        "invalid choice: 'slow'",
    ),
    "features": (["features", "--helpers", "no_such_type"], "unknown program type 'no_such_type'"),
    "objdump": (["objdump"], "the following arguments are required: object"),
    "trace": (["trace", "bogus"], "no ':' after the probe kind"),
    "trace-empty": (["trace", "tracepoint:"], "bad probe 'tracepoint:'"),
    "trace-event": (["trace", "software:no-such-event"], "unknown software event 'no-such-event'"),
    "trace-duration": (
        ["trace", "t:syscalls:sys_enter_getpid", "--latency", "--min-latency", "3 weeks"],
        "--min-latency: bad duration '3 weeks'",
    ),
    "trace-seconds": (["trace", "t:syscalls:sys_enter_getpid", "-d", "-1"], "-d needs a number of seconds"),
    "trace-command": (["trace", "t:syscalls:sys_enter_getpid", "-c", "'unclosed"], "no closing quotation"),
    "trace-options": (["trace", "t:syscalls:sys_enter_getpid", "-p", "1", "-c", "true"], "not both"),
    "trace-empty-command": (["trace", "t:syscalls:sys_enter_getpid", "-c", ""], "-c needs a command"),
    "trace-blank-command": (["trace", "t:syscalls:sys_enter_getpid", "-c", "  "], "-c needs a command"),
    "trace-port": (["trace", "t:syscalls:sys_enter_getpid", "--prometheus", "99999"],
                   "--prometheus needs a TCP port (0 to 65535), not 99999"),
    "trace-negative-port": (["trace", "t:syscalls:sys_enter_getpid", "--prometheus", "-1"], "--prometheus needs a TCP"),
    "trace-port-text": (["trace", "t:syscalls:sys_enter_getpid", "--prometheus", "http"], "invalid int value"),
    "run-empty-command": (["run", OBJ, "-c", ""], "-c needs a command"),
    "run": (["run", OBJ, "--set", "novalue"], "--set takes NAME=VALUE, not 'novalue'"),
    "run-pid-var": (["run", OBJ, "--pid-var", "target_tgid"], "--pid-var needs -c CMD"),
    "emulate": (["emulate", OBJ, "--workload", "bpf_fentry_test1(x)"], "--workload"),
    "emulate-policy": (["emulate", OBJ, "--policy", "share-all"], "invalid choice: 'share-all'"),
}


@pytest.mark.parametrize("case", sorted(USAGE))
def test_malformed_argument_exits_2_with_one_line(case):
    args, needle = USAGE[case]
    line = the_line(bpfmux(*args), 2)
    assert line.startswith("bpfmux: error: ") and needle in line, line
    assert f"(see 'bpfmux {args[0]}" in line  # points to the subcommand's --help


def test_usage_error_found_before_the_privilege_check(monkeypatch, capsys):
    """A bad spec is bad usage even for a user who could not trace at all."""
    from bpfmux.cli import _common
    from bpfmux.cli.main import main

    monkeypatch.setattr(_common, "read_privileges", lambda: _common.Privileges(1000, 0, 2))
    assert main(["trace", "tracepoint:"]) == 2
    assert "bad probe" in capsys.readouterr().err


# --- exit status 1: it failed at run time -------------------------------------------------------


def _full() -> int:
    return os.open("/dev/full", os.O_WRONLY)


RUNTIME = {
    "btf": (["btf", "show", "no_such_type", "--file", OBJ], "no BTF type named 'no_such_type'", None),
    "conformance": (
        ["conformance", str(ROOT / "tests" / "data" / "conformance"), "--tier", "fast"],
        "No space left on device",
        _full,
    ),
    "features": (["features", "--json"], "No space left on device", _full),
    "objdump": (["objdump", str(BPF / "multi.bpf.c")], "not a readable ELF object", None),
    "trace": (["trace", "t:syscalls:sys_enter_getpid", "-p", NO_SUCH_PID], f"no process with pid {NO_SUCH_PID}", None),
    "run": (["run", "/nonexistent/prog.bpf.o"], "no such file: /nonexistent/prog.bpf.o", None),
    "run-event-type": (["run", str(BPF / "ringbuf.bpf.o"), "--event-type", "no_such_event"],
                       "--event-type no_such_event: no struct named 'no_such_event'", None),
    "emulate": (["emulate", str(BPF / "multi.bpf.c"), "--btf", "none"], "not a readable ELF object", None),
}


def _run_with_stdout(args: list[str], stdout: object) -> subprocess.CompletedProcess:
    fd = stdout() if callable(stdout) else None
    try:
        return bpfmux(*args, stdout=fd if fd is not None else subprocess.PIPE)
    finally:
        if fd is not None:
            os.close(fd)


@pytest.mark.parametrize("cmd", sorted(RUNTIME))
def test_runtime_error_exits_1_with_one_line(cmd):
    args, needle, stdout = RUNTIME[cmd]
    line = the_line(_run_with_stdout(args, stdout), 1)
    assert needle in line, line
    assert "--help" not in line  # not a usage error


@pytest.mark.parametrize("cmd", sorted(RUNTIME))
def test_debug_shows_the_traceback(cmd):
    args, needle, stdout = RUNTIME[cmd]
    r = _run_with_stdout([args[0], "--debug", *args[1:]], stdout)
    assert r.returncode == 1, r.stderr
    assert "Traceback (most recent call last):" in r.stderr
    last = [line for line in r.stderr.splitlines() if line.strip()][-1]
    assert last.startswith("bpfmux: ") and needle in last, r.stderr


def test_debug_before_the_subcommand_and_on_a_usage_error():
    r = bpfmux("--debug", "btf", "show", "no_such_type", "--file", OBJ)
    assert r.returncode == 1 and "Traceback" in r.stderr
    r = bpfmux("trace", "--debug", "bogus")
    assert r.returncode == 2 and "Traceback" in r.stderr and "bad probe 'bogus'" in r.stderr.splitlines()[-1]


def test_every_subcommand_documents_its_exit_statuses():
    from bpfmux.cli.main import SUBCOMMANDS

    r = bpfmux("--help")
    assert r.returncode == 0 and "exit status:" in r.stdout and "2 on bad usage" in r.stdout
    for name in SUBCOMMANDS:
        r = bpfmux(name, "--help")
        text = " ".join(r.stdout.split())
        assert r.returncode == 0 and "--debug" in text, name
        assert "xit status: 0" in text and "2 on bad usage" in text and "130" in text, (name, r.stdout)


# --- Ctrl-C and closed pipes -------------------------------------------------------------------


def _wait_blocked(p: subprocess.Popen, call: str) -> None:
    """Wait until ``p`` sleeps in ``pipe_read``/``pipe_write`` (it is inside the subcommand)."""
    end = time.monotonic() + TIMEOUT
    while time.monotonic() < end:
        assert p.poll() is None, p.stderr.read() if p.stderr else ""
        try:
            if call in Path(f"/proc/{p.pid}/wchan").read_text():
                return
        except OSError:
            pass
        time.sleep(0.02)
    pytest.fail(f"bpfmux never blocked in {call}")


def test_ctrl_c_while_reading_a_call_stream_exits_130():
    p = start("emulate", OBJ, "--btf", "none", "--calls", "-", stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        p.stdin.write('{"call": "bpf_fentry_test1", "args": [1]}\n')
        p.stdin.flush()
        _wait_blocked(p, "pipe_read")
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=TIMEOUT)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130, err
    assert err == "" and out == ""


@pytest.mark.skipif(not os.path.exists("/sys/kernel/btf/vmlinux"), reason="no kernel BTF")
def test_ctrl_c_while_writing_exits_130():
    p = start("btf", "dump", stdout=subprocess.PIPE)
    try:
        _wait_blocked(p, "pipe_write")  # the pipe is full: nobody reads it yet
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=TIMEOUT)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130, err
    assert err == "" and out.startswith("[1] ")


PIPED = {
    "btf": ["btf", "show", "struct bits", "--file", str(BPF / "btf_kinds.bpf.o")],
    "conformance": ["conformance", str(ROOT / "tests" / "data" / "conformance"), "--tier", "fast"],
    "features": ["features"],  # rich tables
    "objdump": ["objdump", str(BPF / "multi.bpf.o")],
    "emulate": ["emulate", str(BPF / "multi.bpf.o"), "--show"],  # rich tables
}


@pytest.mark.parametrize("cmd", sorted(PIPED))
def test_closed_pipe_exits_0_quietly(cmd):
    """``bpfmux … | head`` when head has gone: status 0 and nothing on stderr."""
    p = start(*PIPED[cmd], stdout=subprocess.PIPE)
    p.stdout.close()  # every write fails with EPIPE
    err = p.stderr.read()
    p.wait(timeout=TIMEOUT)
    assert p.returncode == 0 and err == "", err


# --- what is missing when the kernel refuses -----------------------------------------------------


def _privileges(monkeypatch, *args: object):
    from bpfmux.cli import _common

    priv = _common.Privileges(*args)
    monkeypatch.setattr(_common, "read_privileges", lambda: priv)
    return _common


ALL_CAPS = (1 << 41) - 1
NO_BPF_CAPS = ALL_CAPS & ~(1 << 39 | 1 << 38 | 1 << 21)


def test_root_without_the_capabilities_is_told_so(monkeypatch):
    common = _privileges(monkeypatch, 0, NO_BPF_CAPS)
    with pytest.raises(common.CliError) as e:
        common.ensure_root("bpfmux trace")
    msg = str(e.value)
    assert "runs as root but without CAP_BPF and CAP_PERFMON" in msg and "--cap-add BPF --cap-add PERFMON" in msg
    assert "sudo" not in msg


def test_root_without_perfmon_only(monkeypatch):
    common = _privileges(monkeypatch, 0, ALL_CAPS & ~(1 << 38 | 1 << 21))
    with pytest.raises(common.CliError, match=r"without CAP_PERFMON \(nor CAP_SYS_ADMIN\).*--cap-add PERFMON\)$"):
        common.ensure_root("bpfmux run")


def test_user_is_told_about_unprivileged_bpf_disabled(monkeypatch):
    common = _privileges(monkeypatch, 1000, 0, 2)
    with pytest.raises(common.CliError) as e:
        common.ensure_root("bpfmux trace")
    msg = str(e.value)
    assert msg.startswith("bpfmux trace needs root (CAP_BPF and CAP_PERFMON)")
    assert "user 1000 lacks CAP_BPF and CAP_PERFMON" in msg and "unprivileged_bpf_disabled=2" in msg
    assert msg.endswith("run it as root (sudo)")
    _privileges(monkeypatch, 1000, 0, 0)
    assert "unprivileged_bpf_disabled" not in common.privilege_problem()


def test_capabilities_are_what_counts(monkeypatch):
    common = _privileges(monkeypatch, 1000, 1 << 39 | 1 << 38)  # a user given CAP_BPF and CAP_PERFMON
    common.ensure_root("bpfmux trace")
    _privileges(monkeypatch, 0, 1 << 21)  # CAP_SYS_ADMIN stands in for both, as in the kernel
    common.ensure_root("bpfmux trace")


def test_permission_denied_line_says_what_is_missing(monkeypatch):
    from bpfmux.errors import BpfError

    err = BpfError(errno.EPERM, "BPF_PROG_LOAD failed")
    common = _privileges(monkeypatch, 0, NO_BPF_CAPS)
    line = common.error_line(err)
    assert line.startswith("bpfmux: permission denied: BPF_PROG_LOAD failed") and "\n" not in line
    assert "runs as root but without CAP_BPF and CAP_PERFMON" in line and "sudo" not in line
    _privileges(monkeypatch, 1000, 0, 2)
    line = common.error_line(err)
    assert "unprivileged_bpf_disabled=2" in line and line.endswith("run it as root (sudo)")
    _privileges(monkeypatch, 0, ALL_CAPS, 0, "confidentiality")
    line = common.error_line(err)
    assert "has CAP_BPF and CAP_PERFMON" in line and "locked down (confidentiality)" in line and "sudo" not in line
    _privileges(monkeypatch, 0, ALL_CAPS, 0, None, 2)
    assert "seccomp filter" in common.error_line(err)
    _privileges(monkeypatch, 0, ALL_CAPS)
    assert "security module" in common.error_line(err)


def test_read_privileges_of_this_process():
    from bpfmux.cli._common import read_privileges

    p = read_privileges()
    assert p.euid == os.geteuid()
    if os.geteuid() == 0 and p.has(21):
        assert p.missing == []


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root and setpriv")
def test_root_in_a_capability_less_process_is_told_what_is_missing():
    """A real root process whose capability bounding set lacks CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN."""
    cmd = ["setpriv", "--bounding-set", "-bpf,-perfmon,-sys_admin", *BPFMUX, "trace", "t:syscalls:sys_enter_getpid"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, env=ENV, cwd=ROOT)
    if "unknown capability" in r.stderr or "setpriv:" in r.stderr:
        pytest.skip(f"this setpriv cannot drop these: {r.stderr.strip()}")
    line = the_line(r, 1)
    assert "runs as root but without CAP_BPF and CAP_PERFMON (nor CAP_SYS_ADMIN)" in line

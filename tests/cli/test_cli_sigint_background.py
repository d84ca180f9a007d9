"""SIGINT ends every subcommand, also when it was started in the background
of a script: a shell starts a script's background jobs (``bpfmux trace … &``)
with SIGINT ignored, and a Python program keeps it ignored unless it installs
a handler itself. Each case starts the command that way, with an input that
keeps it busy for many seconds, waits until its SIGINT handler is installed
(``SigCgt`` in ``/proc/PID/status``) and the command is at work, sends
SIGINT and expects the command to end with its status (130 when interrupted
before there was anything to report, 0 when ``trace``/``run`` show what they
collected) and without a traceback, in bounded memory (its own peak RSS,
measured with ``resource.getrusage`` as in ``tests/unit/test_hostile_inputs.py``).

The timeouts only stop a hang; nothing here is about speed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BPF = ROOT / "tests" / "bpf"
MiB = 1 << 20
#: Runs ``bpfmux ARGS``, then writes the process's own peak RSS (KiB) to $BOUNDS_RSS (as tests/unit/test_hostile_inputs).
_MEASURE = """
import os, resource, runpy, sys
inherited = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
sys.argv = ["bpfmux"] + sys.argv[1:]
try:
    runpy.run_module("bpfmux.cli.main", run_name="__main__", alter_sys=True)
finally:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if peak <= inherited:  # the parent's peak, carried over exec: read this memory map's own
        with open("/proc/self/status") as status:
            peak = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
    with open(os.environ["BOUNDS_RSS"], "w") as f:
        f.write(str(peak))
"""
SIGINT_BIT = 1 << (signal.SIGINT - 1)


def _sigmask(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1], 16) for line in status if line.startswith(field + ":"))


def _background() -> None:
    """In the child before exec: SIGINT ignored, as a shell leaves it for a script's background job."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def interrupted(tmp_path: Path, args: list[str], ready: str | None = None, settle: float = 0.5,
                env: dict[str, str] | None = None) -> tuple[int, str]:
    """Start ``bpfmux ARGS`` with SIGINT ignored, interrupt it once it is at
    work (its handler installed, ``ready`` printed on stderr if given, then
    ``settle`` seconds) and return its exit status and stderr. Its peak
    memory stays under 300 MiB."""
    err_path = tmp_path / "stderr"
    rss = tmp_path / "rss"
    with open(err_path, "w") as err:
        p = subprocess.Popen([sys.executable, "-c", _MEASURE, *args], cwd=ROOT, stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=err, preexec_fn=_background,
                             env=dict(os.environ, BOUNDS_RSS=str(rss), **(env or {})))
    try:
        deadline = time.monotonic() + 60
        while not _sigmask(p.pid, "SigCgt") & SIGINT_BIT:
            assert p.poll() is None, f"ended before taking SIGINT: {err_path.read_text()[-2000:]}"
            assert time.monotonic() < deadline, "no SIGINT handler after 60 s"
            time.sleep(0.01)
        assert not _sigmask(p.pid, "SigIgn") & SIGINT_BIT
        while ready is not None and ready not in err_path.read_text():
            assert p.poll() is None, err_path.read_text()[-2000:]
            assert time.monotonic() < deadline, f"{ready!r} not printed after 60 s"
            time.sleep(0.05)
        time.sleep(settle)
        assert p.poll() is None, f"the input did not keep the command busy: {err_path.read_text()[-2000:]}"
        p.send_signal(signal.SIGINT)
        status = p.wait(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    err_text = err_path.read_text()
    assert "Traceback" not in err_text, err_text[-3000:]
    assert int(rss.read_text()) * 1024 < 300 * MiB
    return status, err_text


def test_the_shell_really_starts_background_jobs_with_sigint_ignored() -> None:
    # what the cases imitate: sh -c 'CMD & wait' gives CMD an ignored SIGINT
    out = subprocess.run(["sh", "-c", f"{sys.executable} -c 'import signal; print(signal.getsignal(2) is signal.SIG_IGN)' & wait"],
                         capture_output=True, text=True, timeout=60).stdout
    assert out.strip() == "True"


def test_btf_dump(tmp_path: Path) -> None:
    status, _ = interrupted(tmp_path, ["btf", "dump", "/sys/kernel/btf/vmlinux"])
    assert status == 130


def test_btf_dump_c(tmp_path: Path) -> None:
    status, _ = interrupted(tmp_path, ["btf", "dump", "--format", "c", "/sys/kernel/btf/vmlinux"])
    assert status == 130


def test_objdump(tmp_path: Path) -> None:
    # 200,000 instructions: an object clang assembles in a second and objdump lists for many seconds
    src = tmp_path / "big.s"
    with open(src, "w") as f:
        f.write('\t.section "tracepoint/syscalls/sys_enter_getpid","ax",@progbits\n\t.globl prog\n'
                "\t.type prog,@function\nprog:\n\tr0 = 0\n")
        f.write("\tr0 += 1\n" * 200_000)
        f.write("\texit\n.Lend:\n\t.size prog, .Lend-prog\n"
                '\t.section "license","aw",@progbits\n\t.globl _license\n_license:\n\t.asciz "GPL"\n')
    obj = tmp_path / "big.o"
    subprocess.run(["clang", "-target", "bpf", "-c", str(src), "-o", str(obj)], check=True, timeout=120)
    status, _ = interrupted(tmp_path, ["objdump", str(obj)])
    assert status == 130


@pytest.mark.usefixtures("root_required")
def test_features(tmp_path: Path) -> None:
    # a fresh cache: every helper of every program type is probed (thousands of loads)
    status, _ = interrupted(tmp_path, ["features", "--helpers", "all"], env={"XDG_CACHE_HOME": str(tmp_path)})
    assert status == 130


def test_conformance(tmp_path: Path) -> None:
    cases = tmp_path / "cases"
    cases.mkdir()
    for i in range(30):  # each runs 3,000,000 instructions on two tiers
        (cases / f"loop{i}.data").write_text("-- asm\nmov %r0, 0\nmov %r1, 1000000\nadd %r0, 1\n"
                                             "jlt %r0, %r1, -2\nexit\n-- result\n0xf4240\n")
    status, _ = interrupted(tmp_path, ["conformance", str(cases)])
    assert status == 130


def test_emulate(tmp_path: Path) -> None:
    status, _ = interrupted(tmp_path, ["emulate", str(BPF / "hostile.bpf.o"), "--btf", "none",
                                       "--run-budget", str(1 << 40)], settle=2)
    assert status == 130


def test_trace_emulated(tmp_path: Path) -> None:
    status, _ = interrupted(tmp_path, ["trace", "k:bpf_fentry_test1", "--emulate", "bpf_fentry_test1(1)*10000000"],
                            settle=2)
    assert status == 130


@pytest.mark.usefixtures("root_required")
@pytest.mark.parametrize("mode", ["--count", "--latency", "--args", "--stacks"])
def test_trace_live(tmp_path: Path, mode: str) -> None:
    status, err = interrupted(tmp_path, ["trace", "t:syscalls:sys_enter_getpid", mode, "--plain"], ready="tracing")
    assert status == 0, err  # tracing had begun: the results are shown


@pytest.mark.usefixtures("root_required")
def test_run(tmp_path: Path) -> None:
    status, err = interrupted(tmp_path, ["run", str(BPF / "getpid.bpf.o")], ready="attached")
    assert status == 0, err

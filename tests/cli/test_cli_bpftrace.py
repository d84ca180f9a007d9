"""``bpfmux bpftrace`` (``bpfmux bt``): bpftrace's command line. Most tests run
the script on the emulated kernel (``--emulate``), so they need no root;
``tests/live/test_bpftrace_*.py`` compare with bpftrace itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BPFMUX = [sys.executable, "-m", "bpfmux.cli.main"]


def bt(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    return subprocess.run([*BPFMUX, "bt", *args], capture_output=True, text=True, timeout=120, input=stdin, env=env)


def test_hello_world_on_the_emulated_kernel() -> None:
    r = bt("-e", 'BEGIN { printf("hello world\\n"); }', "--emulate", "")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "Attaching 1 probe...\nhello world\n\n\n"


def test_counts_and_histograms_on_a_workload() -> None:
    prog = ("tracepoint:syscalls:sys_enter_getpid { @[comm] = count(); } "
            "tracepoint:raw_syscalls:sys_exit { @ret = hist(args->ret); }")  # fmt: skip
    r = bt("-e", prog, "--emulate", "sys:getpid*3,sys:getppid*2")
    assert r.returncode == 0, r.stderr
    assert "@[bpfmux-emu]: 3\n" in r.stdout
    assert "@ret: \n[0]                    5 |@@@@" in r.stdout


def test_a_script_file_its_parameters_and_stdin(tmp_path: Path) -> None:
    script = tmp_path / "p.bt"
    script.write_text('BEGIN { printf("%d %s %d\\n", $1, str($2), $#); exit(); }\n')
    r = bt(str(script), "5", "five", "--emulate", "")
    assert r.returncode == 0, r.stderr
    assert "5 five 2\n" in r.stdout
    r = bt("-", "6", "six", "--emulate", "", stdin=script.read_text())
    assert "6 six 2\n" in r.stdout


def test_json_output_and_quiet() -> None:
    r = bt("-f", "json", "-q", "-e", 'BEGIN { printf("x"); @a[1] = count(); @h = hist(4); exit(); }', "--emulate", "")
    assert r.returncode == 0, r.stderr
    lines = [json.loads(line) for line in r.stdout.splitlines() if line.strip()]
    assert lines[0] == {"type": "printf", "data": "x"}
    assert {"type": "map", "data": {"@a": {"1": 1}}} in lines
    assert {"type": "hist", "data": {"@h": [{"min": 4, "max": 7, "count": 1}]}} in lines


def test_output_file(tmp_path: Path) -> None:
    out = tmp_path / "out.txt"
    r = bt("-o", str(out), "-e", 'BEGIN { printf("to the file\\n"); exit(); }', "--emulate", "")
    assert r.returncode == 0, r.stderr
    assert out.read_text() == "Attaching 1 probe...\nto the file\n" and r.stdout == "\n\n"


@pytest.mark.parametrize(("args", "where", "message"), [
    (["-e", "BEGIN { @x = foo(1); }"], "stdin:1:14", "unknown function: foo"),
    (["-e", "BEGIN { printf(\"%d\\n\", \"s\"); }"], "stdin:1:9", "%d specifier expects a value of type integer"),
    (["-e", "BEGIN { $x = 1; $x = \"s\"; }"], "stdin:1:20", "type mismatch for $x"),
    (["-e", "BEGIN { @x = 1; @x = \"s\"; }"], "stdin:1:22", "type mismatch for @x"),
    (["-e", "BEGIN { print(@nope); }"], "stdin:1:15", "undefined map: @nope"),
    (["-e", "BEGIN { @x = retval; }"], "stdin:1:14", "retval builtin can only be used"),
    (["-e", "BEGIN { system(\"ls\"); }"], "stdin:1:9", "needs --unsafe"),
    (["-e", "BEGIN { count(); }"], "stdin:1:9", "count() should be directly assigned to a map"),
    (["-e", "tracepoint:syscalls:sys_enter_openat { @ = args->nosuch; }"], "stdin:1:44", "has no field named 'nosuch'"),
    (["-e", "BEGIN { $x = (struct nosuch *)0; }"], "stdin:1:14", "unknown type 'struct nosuch'"),
    (["-e", "BEGIN { break; }"], "stdin:1:9", "'break' outside of a loop"),
    (["-e", "nosuch:x { }"], "stdin:1:1", "unknown probe type 'nosuch'"),
    (["-e", "BEGIN { } BEGIN { }"], "stdin:1:11", "more than one BEGIN probe defined"),
    (["-e", "BEGIN { @x = lhist(1, 0, $1, 1); }"], "stdin:1:26", "lhist() max must be an integer literal"),
])  # fmt: skip
def test_a_script_that_does_not_compile_says_where_and_what(args: list[str], where: str, message: str) -> None:
    r = bt(*args, "--emulate", "")
    assert r.returncode == 1, r.stdout
    first, *rest = r.stderr.splitlines()
    assert first.startswith(f"bpfmux: error: {where}: ") and message in first, r.stderr
    assert len(rest) == 2 and "^" in rest[1] and "Traceback" not in r.stderr  # the line, and a caret under it
    col = int(where.rsplit(":", 1)[1])
    assert rest[1].index("^") == col - 1


def test_syntax_errors_show_what_was_expected(tmp_path: Path) -> None:
    script = tmp_path / "bad.bt"
    script.write_text("BEGIN\n{\n  printf(\"x\"\n}\n")
    r = bt(str(script), "--emulate", "")
    assert r.returncode == 1
    assert r.stderr.splitlines()[0] == f"bpfmux: error: {script}:4:1: unexpected '}}' after an argument of printf(); " \
                                       "expected ',' or ')'"  # fmt: skip
    assert r.stderr.splitlines()[1:] == ["}", "^"]


@pytest.mark.parametrize("args", [
    ["-c", "ls", "-p", "1", "-e", "BEGIN {}"],
    ["-f", "yaml", "-e", "BEGIN {}"],
    ["-B", "sometimes", "-e", "BEGIN {}"],
    ["-v", "-d", "-e", "BEGIN {}"],
    [],
])  # fmt: skip
def test_bad_usage_exits_2(args: list[str]) -> None:
    r = bt(*args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stderr.startswith("bpfmux: error: ") and len(r.stderr.splitlines()) == 1


def test_dry_run_prints_the_programs_without_root() -> None:
    r = bt("-d", "-e", "kprobe:bpf_fentry_test1 { @[comm] = count(); }")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("; kprobe:bpf_fentry_test1: kprobe") and "call" in r.stdout


def test_version_and_alias() -> None:
    r = bt("-V")
    assert r.returncode == 0 and r.stdout.startswith("bpftrace v0.17.0")
    r = subprocess.run([*BPFMUX, "bpftrace", "--help"], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=str(ROOT / "src")))  # fmt: skip
    assert r.returncode == 0 and "-e PROGRAM" in r.stdout


def test_listing_without_a_kernel_of_its_own() -> None:
    r = bt("-l", "tracepoint:sched:sched_switch")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "tracepoint:sched:sched_switch\n"


def test_sigint_ends_tracing_even_when_started_with_sigint_ignored(root_required: None) -> None:
    # a shell's background job starts with SIGINT ignored; bpftrace still stops on it, and so must we
    import signal
    import time

    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))

    def ignore_sigint() -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    p = subprocess.Popen([*BPFMUX, "bt", "-e", 'BEGIN { printf("go\\n"); @x = 1; }'], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env, preexec_fn=ignore_sigint)  # fmt: skip
    try:
        assert p.stdout is not None
        lines = [p.stdout.readline(), p.stdout.readline()]
        assert lines == ["Attaching 1 probe...\n", "go\n"], p.stderr.read() if p.stderr else ""
        time.sleep(0.2)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0, err
    assert out == "\n\n@x: 1\n"  # what bpftrace 0.17 prints after its BEGIN output

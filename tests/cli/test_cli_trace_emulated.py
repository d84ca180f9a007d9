"""``bpfmux trace --emulate``: the same tracer on the emulated kernel, for
every probe kind, without root. Each count is checked against the workload
that drove the emulated kernel (N calls of a kernel function, N system
calls, N calls of a user function, N samples)."""

from __future__ import annotations

import json

import pytest

from bpfmux.cli.main import main
from bpfmux.trace import TraceOptions, Tracer, parse_probes

LIBC = "libc.so.6"


def trace(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[dict], str]:
    """Run ``bpfmux trace ARGS --json`` in this process; (status, JSON lines, stderr)."""
    status = main(["trace", *args, "--json"])
    out, err = capsys.readouterr()
    return status, [json.loads(line) for line in out.splitlines() if line.strip()], err


@pytest.mark.parametrize(("probe", "workload", "expected"), [
    ("kprobe:bpf_fentry_test1", "bpf_fentry_test1(1)*5,bpf_fentry_test2(1,2)", {"kprobe:bpf_fentry_test1": 5}),
    ("kretprobe:bpf_fentry_test2", "bpf_fentry_test2(1,2)*3", {"kretprobe:bpf_fentry_test2": 3}),
    ("kprobe:bpf_fentry_test[12]", "bpf_fentry_test1(1)*2,bpf_fentry_test2(1,2)*7",
     {"kprobe:bpf_fentry_test1": 2, "kprobe:bpf_fentry_test2": 7}),
    ("fentry:bpf_fentry_test3", "bpf_fentry_test3(4,5,6)*4", {"fentry:bpf_fentry_test3": 4}),
    ("fexit:bpf_fentry_test1", "bpf_fentry_test1(1)*2", {"fexit:bpf_fentry_test1": 2}),
    ("tracepoint:syscalls:sys_enter_getpid", "sys:getpid*6,sys:getppid*2", {"tracepoint:syscalls:sys_enter_getpid": 6}),
    ("tracepoint:syscalls:sys_exit_getppid", "sys:getpid*6,sys:getppid*2", {"tracepoint:syscalls:sys_exit_getppid": 2}),
    ("tracepoint:sched:sched_switch", "tp:sched:sched_switch*9", {"tracepoint:sched:sched_switch": 9}),
    ("rawtracepoint:sched_wakeup", "tp:sched:sched_wakeup*3", {"rawtracepoint:sched_wakeup": 3}),
    (f"uprobe:{LIBC}:strlen", f"user:{LIBC}:strlen*4,user:{LIBC}:strcmp",
     {f"uprobe:/lib/x86_64-linux-gnu/{LIBC}:strlen": 4}),
    (f"uretprobe:{LIBC}:strcmp", f"user:{LIBC}:strlen*4,user:{LIBC}:strcmp",
     {f"uretprobe:/lib/x86_64-linux-gnu/{LIBC}:strcmp": 1}),
    ("profile:hz:99", "sample:cpu_clock*5", {"profile:hz:99": 5}),
    ("software:page-faults:1", "sample:page_faults*2,sample:cpu_clock", {"software:page-faults:1": 2}),
])
def test_every_probe_kind_counts_exactly_what_the_workload_did(capsys, probe, workload, expected):
    status, rows, err = trace(capsys, probe, "--emulate", workload)
    assert status == 0, err
    assert {r["probe"]: r["count"] for r in rows} == expected


def test_a_syscall_glob_is_one_filtered_raw_tracepoint_and_counts_per_command(capsys, tmp_path):
    stream = tmp_path / "calls.jsonl"
    stream.write_text("\n".join(json.dumps(e) for e in [
        {"task": {"pid": 7, "tgid": 7, "comm": "alpha"}},
        {"syscall": "getpid", "repeat": 3},
        {"task": {"pid": 8, "tgid": 8, "comm": "beta"}},
        {"syscall": "getpid"},
        {"syscall": "openat", "args": [-100, 0, 0], "ret": 3},
    ]) + "\n")
    status, rows, err = trace(capsys, "t:syscalls:sys_enter_get*", "t:syscalls:sys_enter_openat", "--by", "comm",
                              "-v", "--emulate", str(stream))
    assert status == 0, err
    assert "1 raw tracepoint (sys_enter) with an in-kernel filter" in err
    got = {(r["probe"], r["comm"]): r["count"] for r in rows}
    assert got == {("tracepoint:syscalls:sys_enter_getpid", "alpha"): 3,
                   ("tracepoint:syscalls:sys_enter_getpid", "beta"): 1,
                   ("tracepoint:syscalls:sys_enter_openat", "beta"): 1}


@pytest.mark.parametrize(("probe", "workload", "name", "mechanism"), [
    ("kprobe:bpf_fentry_test1", "bpf_fentry_test1(1)*4", "kprobe:bpf_fentry_test1", "kprobe session"),
    ("tracepoint:syscalls:sys_enter_getpid", "sys:getpid*4", "syscall:getpid", "sys_enter"),
    (f"uprobe:{LIBC}:strlen", f"user:{LIBC}:strlen*4", f"uprobe:/lib/x86_64-linux-gnu/{LIBC}:strlen",
     "uprobe session"),
    ("fentry:bpf_fentry_test1", "bpf_fentry_test1(1)*4", "fentry:bpf_fentry_test1", "fentry trampoline"),
])
def test_latency_histograms_hold_one_entry_per_call(capsys, probe, workload, name, mechanism):
    status, rows, err = trace(capsys, probe, "--latency", "-v", "--emulate", workload)
    assert status == 0, err
    assert mechanism in err
    (row,) = rows
    assert row["probe"] == name
    assert row["calls"] == 4 and sum(b["count"] for b in row["hist"]) == 4


def test_args_mode_prints_one_event_per_hit(capsys):
    status, events, err = trace(capsys, "t:syscalls:sys_enter_openat", "--args", "--emulate",
                                "sys:openat*3,sys:getpid")
    assert status == 0, err
    assert len(events) == 3 and {e["probe"] for e in events} == {"tracepoint:syscalls:sys_enter_openat"}


def test_stacks_mode_aggregates_one_stack_per_distinct_path(capsys):
    status, rows, err = trace(capsys, "kprobe:bpf_fentry_test1", "--stacks", "--emulate", "bpf_fentry_test1(1)*5")
    assert status == 0, err
    assert sum(r["count"] for r in rows) == 5


def test_the_tracer_api_runs_on_an_emulator_given_as_the_kernel():
    from bpfmux import Emulator

    with Emulator() as emu, Tracer(parse_probes(["k:bpf_fentry_test2"]), TraceOptions(), kernel=emu) as t:
        for _ in range(3):
            emu.call("bpf_fentry_test2", 2, 3)
        snap = t.snapshot()
        assert {t.probes[k[0]].name: n for k, n in snap.counts.items()} == {"kprobe:bpf_fentry_test2": 3}
    assert emu.closed and not emu.registry.links  # the tracer closed its links before the emulator


def test_emulate_refuses_a_real_command(capsys):
    status = main(["trace", "k:bpf_fentry_test1", "--emulate", "bpf_fentry_test1(1)", "-c", "true"])
    assert status != 0
    assert "--emulate" in capsys.readouterr().err

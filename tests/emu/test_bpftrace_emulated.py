"""bpftrace scripts on the emulated kernel, through the pytest plugin's
``bpftrace_script`` fixture: the same programs, maps and output as on the live
kernel, driven by a workload instead of the machine (no root)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bpfmux.bpftrace.errors import ScriptError


def tool(bpftrace_tools: Path, name: str) -> str:
    return (bpftrace_tools / "tools" / f"{name}.bt").read_text()


def test_syscount_counts_the_workloads_syscalls(bpftrace_script, bpftrace_tools: Path) -> None:
    out = bpftrace_script(tool(bpftrace_tools, "syscount"), "sys:getpid*3,sys:openat*2")
    assert "@syscall[39]: 3\n" in out and "@syscall[257]: 2\n" in out
    assert out.index("@syscall[257]") < out.index("@syscall[39]")  # increasing counts, as bpftrace prints
    assert "@process[bpfmux-emu]: 5\n" in out


def test_vfscount_on_a_kernel_with_kprobes(bpftrace_script, bpftrace_tools: Path) -> None:
    out = bpftrace_script(tool(bpftrace_tools, "vfscount"), "vfs_read(1,2,3,4)*3,vfs_write(1,2,3,4)")
    assert out.endswith("@[vfs_write]: 1\n@[vfs_read]: 3\n")
    assert re.match(r"Attaching \d+ probes\.\.\.\nTracing VFS calls", out)


def test_kprobe_globs_count_once_and_missing_functions_of_a_list_are_skipped(bpftrace_script) -> None:
    # bpftrace 0.17 attaches a kprobe glob with one kprobe_multi link ("Attaching" counts it once) and skips a
    # function of a probe list that cannot be probed (biolatency's blk_account_io_start, __blk_account_io_start)
    prog = "kprobe:no_such_function_x, kprobe:vfs_read { @[func] = count(); } kprobe:vfs_* { @all = count(); }"
    out = bpftrace_script(prog, "vfs_read(1,2,3,4)*2,vfs_write(1,2,3,4)")
    assert out.startswith("Attaching 3 probes...\n")
    assert out.endswith("\n\n\n@[vfs_read]: 2\n@all: 3\n")


def test_pidpersec_prints_per_interval_and_clears(bpftrace_script, bpftrace_tools: Path) -> None:
    out = bpftrace_script(tool(bpftrace_tools, "pidpersec"), "tp:sched:sched_process_fork*4")
    assert re.search(r"^\d\d:\d\d:\d\d PIDs/sec: @: 4$", out, re.M)
    assert out.endswith("\n\n@: 0\n")


def test_opensnoop_reads_the_file_name_from_memory(bpftrace_script, bpftrace_tools: Path) -> None:
    def work(emu) -> None:
        name = emu.alloc(b"/etc/hosts\0")
        emu.syscall("openat", -100, name, 0, ret=3)
        emu.syscall("openat", -100, name, 0, ret=-2)

    out = bpftrace_script(tool(bpftrace_tools, "opensnoop"), work)
    rows = [line.split() for line in out.splitlines() if "/etc/hosts" in line]
    assert rows == [["1", "bpfmux-emu", "3", "0", "/etc/hosts"], ["1", "bpfmux-emu", "-1", "2", "/etc/hosts"]]


def test_killsnoop_pairs_entry_and_exit(bpftrace_script, bpftrace_tools: Path) -> None:
    def work(emu) -> None:
        emu.syscall("kill", 1234, 9, ret=0)
        emu.syscall("kill", 99, 15, ret=-3)

    out = bpftrace_script(tool(bpftrace_tools, "killsnoop"), work)
    rows = [line.split()[1:] for line in out.splitlines() if re.match(r"^\d\d:", line)]
    assert rows == [["1", "bpfmux-emu", "9", "1234", "0"], ["1", "bpfmux-emu", "15", "99", "-3"]]


def test_bitesize_reads_record_fields(bpftrace_script, bpftrace_tools: Path, tmp_path: Path) -> None:
    stream = tmp_path / "io.jsonl"
    stream.write_text('{"fire": "block:block_rq_issue", "fields": {"bytes": 4096, "comm": "dd"}, "repeat": 3}\n'
                      '{"fire": "block:block_rq_issue", "fields": {"bytes": 65536, "comm": "dd"}}\n')  # fmt: skip
    out = bpftrace_script(tool(bpftrace_tools, "bitesize"), str(stream))
    assert "@[dd]: \n[4K, 8K)               3 |@@@@" in out
    assert "[64K, 128K)            1 |@@@@@@@@@@@@@@@@@" in out


def test_kprobe_arguments_return_values_and_strings(bpftrace_script) -> None:
    prog = ("kprobe:bpf_fentry_test1 { @args[arg0] = count(); @[func, probe] = count(); } "
            "kretprobe:bpf_fentry_test1 { @ret = hist(retval); @st = stats(retval); @lo = lhist(retval, 0, 10, 5); }")  # fmt: skip
    out = bpftrace_script(prog, "bpf_fentry_test1(1)*2,bpf_fentry_test1(7)")
    assert "@args[7]: 1\n@args[1]: 2\n" in out  # by increasing count
    assert "@[bpf_fentry_test1, kprobe:bpf_fentry_test1]: 3\n" in out
    assert "@st: count 3, average 4, total 12\n" in out
    assert "[5, 10)                1 |" in out


def test_kfunc_arguments_from_btf(bpftrace_script) -> None:
    prog = "kfunc:bpf_fentry_test2 { @[args->a, args->b] = count(); } kretfunc:bpf_fentry_test2 { @r = sum(retval); }"
    out = bpftrace_script(prog, "bpf_fentry_test2(2,3)*2,bpf_fentry_test2(4,5)")
    assert "@[2, 3]: 2\n@[4, 5]: 1\n" in out or "@[4, 5]: 1\n@[2, 3]: 2\n" in out
    assert "@r: 19\n" in out


def test_uprobes_and_uretprobes(bpftrace_script) -> None:
    prog = "uprobe:libc:strlen { @calls = count(); } uretprobe:libc:strlen { @len = sum(retval); }"
    out = bpftrace_script(prog, [_user("libc.so.6:strlen", 5)] * 3)
    assert "@calls: 3\n@len: 15\n" in out


def _user(target: str, ret: int):
    from bpfmux.emu.kernel.replay import Event

    return Event("user", target, ret=ret)


def test_language_features_in_one_probe(bpftrace_script) -> None:
    prog = ('BEGIN { $i = 0; while ($i < 4) { $i++; @sq[$i] = $i * $i; } unroll(2) { @u++; } '
            '$t = (7, "x"); @tup = $t; @s = $t.1 == "x" ? "yes" : "no"; printf("%-4s|%4d|%x\\n", "ab", $1, 255); '
            'print(@sq, 2); clear(@sq); exit(); printf("never\\n"); } END { printf("end\\n"); }')  # fmt: skip
    out = bpftrace_script(prog, "", "42")
    assert out.startswith("Attaching 2 probes...\nab  |  42|ff\n@sq[3]: 9\n@sq[4]: 16\nend\n")
    assert "@s: yes\n" in out and "@tup: (7, x)\n" in out and "@u: 2\n" in out and "never" not in out


def test_exit_stops_delivering_events(bpftrace_script) -> None:
    prog = 'tracepoint:syscalls:sys_enter_getpid { @n++; if (@n == 2) { exit(); } printf("%d\\n", @n); }'
    out = bpftrace_script(prog, "sys:getpid*5")
    assert out.startswith("Attaching 1 probe...\n1\n\n\n")


def test_json_output(bpftrace_script) -> None:
    out = bpftrace_script('BEGIN { @a["k"] = count(); printf("hi"); exit(); }', "", json=True)
    assert '{"type": "printf", "data": "hi"}\n' in out and '{"type": "map", "data": {"@a": {"k": 1}}}\n' in out


def test_a_script_error_carries_its_place(bpftrace_script) -> None:
    with pytest.raises(ScriptError) as info:
        bpftrace_script("BEGIN { @x = undefined_thing; }")
    assert (info.value.loc.line, info.value.loc.col) == (1, 14)


def test_helper_errors_with_k_and_kk(bpftrace_script) -> None:
    text = "BEGIN { @a[2] = 1; delete(@a[1]); @x = *(uint32*)8; exit(); }"
    assert "WARNING" not in bpftrace_script(text)
    one = bpftrace_script(text, helper_check=1)
    assert one.splitlines()[:4] == [
        "Attaching 1 probe...",
        "stdin:1:20-33: WARNING: Failed to map_delete_elem: No such file or directory (-2)",
        text,
        " " * 19 + "~" * 13,
    ]
    assert "probe_read" not in one
    two = bpftrace_script(text, helper_check=2)
    assert "stdin:1:40-41: WARNING: Failed to probe_read: Bad address (-14)" in two

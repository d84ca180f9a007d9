"""Smoke tests of the VM tier's guest: the right kernel booted and its kprobes and fentry work.

These use the raw shim in ``guest_bpf.py`` rather than ``bpfmux.live`` so that
a failure here points at the harness or the guest kernel, not the library.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

import guest_bpf as raw
import pytest

REPO = Path(__file__).resolve().parents[2]


def _counter(map_fd: int) -> tuple[int, int]:
    count, value = struct.unpack("<QQ", raw.map_lookup(map_fd, 0, 16))
    return count, value


def test_booted_kernel_is_the_harness_kernel(guest_kernel_release: str) -> None:
    assert os.uname().release == guest_kernel_release
    assert os.geteuid() == 0
    assert Path("/sys/kernel/btf/vmlinux").stat().st_size > 1_000_000
    mounts = Path("/proc/mounts").read_text().split("\n")
    types = {line.split()[1]: line.split()[2] for line in mounts if line}
    assert types["/sys/kernel/tracing"] == "tracefs"
    assert types["/sys/fs/bpf"] == "bpf"
    assert types["/"] == "overlay"


def test_bpfmux_imports_from_this_checkout() -> None:
    import bpfmux

    assert Path(bpfmux.__file__).resolve().is_relative_to(REPO / "src")


def test_guest_kernel_config_has_the_hooks_the_host_lacks() -> None:
    # Read from the running kernel's own tracefs, not the package's config file.
    funcs = Path("/sys/kernel/tracing/available_filter_functions").read_text()
    for name in ("bpf_fentry_test1", "bpf_modify_return_test"):
        assert f"\n{name}\n" in funcs or funcs.startswith(f"{name}\n"), f"{name} is not traceable"
    assert Path("/sys/bus/event_source/devices/kprobe/type").exists(), "no kprobe PMU"


def test_fentry_kprobe_and_kretprobe_fire_on_bpf_fentry_test1() -> None:
    """fentry, kprobe and kretprobe on one function; BPF_PROG_TEST_RUN of the fentry program calls it once with a=1."""
    fds: list[int] = []
    try:
        maps = [raw.map_create_array(16, 1) for _ in range(3)]
        fds += maps
        btf_id = raw.btf_func_id("bpf_fentry_test1")
        fentry = raw.prog_load(
            raw.BPF_PROG_TYPE_TRACING,
            raw.counter_prog(maps[0], 0),  # args[0] of the tracing context
            attach_type=raw.BPF_TRACE_FENTRY,
            attach_btf_id=btf_id,
        )
        fds.append(fentry)
        fds.append(raw.link_create(fentry, raw.BPF_TRACE_FENTRY))
        kprobe = raw.prog_load(raw.BPF_PROG_TYPE_KPROBE, raw.counter_prog(maps[1], raw.PT_REGS_DI))
        kretprobe = raw.prog_load(raw.BPF_PROG_TYPE_KPROBE, raw.counter_prog(maps[2], raw.PT_REGS_AX))
        fds += [kprobe, kretprobe]
        for prog, ret in ((kprobe, False), (kretprobe, True)):
            ev = raw.kprobe_perf_event("bpf_fentry_test1", retprobe=ret)
            fds.append(ev)
            raw.perf_attach_bpf(ev, prog)

        assert [_counter(m) for m in maps] == [(0, 0)] * 3
        assert raw.test_run(fentry) == 0
        # bpf_fentry_test1(int a) returns a + 1; the test run calls it once with a = 1.
        assert _counter(maps[0]) == (1, 1)
        assert _counter(maps[1]) == (1, 1)
        assert _counter(maps[2]) == (1, 2)
    finally:
        for fd in reversed(fds):
            os.close(fd)


def test_bpfmux_features_reports_kprobe_multi_and_fentry() -> None:
    import json
    import subprocess
    import sys

    from bpfmux.cli.main import SUBCOMMANDS

    if "features" not in SUBCOMMANDS:
        pytest.skip("`bpfmux features` is not implemented yet (bpfmux.cli has no features subcommand)")
    proc = subprocess.run(
        [sys.executable, "-m", "bpfmux.cli.main", "features", "--json"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    table = json.loads(proc.stdout)
    flat = json.dumps(table)
    assert "kprobe_multi" in flat and "fentry" in flat, flat[:2000]

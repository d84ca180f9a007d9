"""Smoke tests of the VM tier's guest: the right kernel booted and its kprobes and fentry work.

They use only the syscall layer (``bpfmux.live.sys``/``live.perf``), hand-built
instructions and ``bpfmux.btf``, not the link classes, so that a failure here
points at the harness or the guest kernel rather than at the link code.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import struct
import subprocess
import sys
from contextlib import ExitStack
from pathlib import Path

from bpfmux.btf import Btf
from bpfmux.isa.insn import Insn, encode
from bpfmux.live import perf
from bpfmux.live import sys as bsys
from bpfmux.uapi import AttachType, MapType, ProgType

REPO = Path(__file__).resolve().parents[2]
#: Offsets of ``di`` (first argument) and ``ax`` (return value) in x86-64 ``struct pt_regs``.
PT_REGS_DI, PT_REGS_AX = 14 * 8, 10 * 8


def counter_prog(map_fd: int, ctx_off: int) -> bytes:
    """Count runs in slot 0 of array element 0 and store ``*(u64 *)(ctx + ctx_off)`` in slot 1."""
    return encode(
        [
            Insn(0x79, 6, 1, ctx_off, 0),  # r6 = *(u64 *)(r1 + ctx_off)
            Insn(0x62, 10, 0, -4, 0),  # *(u32 *)(r10 - 4) = 0
            Insn(0x18, 1, 1, 0, map_fd),  # r1 = map (pseudo map fd)
            Insn(0xBF, 2, 10, 0, 0),  # r2 = r10
            Insn(0x07, 2, 0, 0, -4),  # r2 += -4
            Insn(0x85, 0, 0, 0, 1),  # call bpf_map_lookup_elem
            Insn(0x15, 0, 0, 3, 0),  # if r0 == 0 goto out
            Insn(0xB7, 1, 0, 0, 1),  # r1 = 1
            Insn(0xDB, 0, 1, 0, 0),  # lock *(u64 *)(r0 + 0) += r1
            Insn(0x7B, 0, 6, 8, 0),  # *(u64 *)(r0 + 8) = r6
            Insn(0xB7, 0, 0, 0, 0),  # out: r0 = 0
            Insn(0x95, 0, 0, 0, 0),  # exit
        ]
    )


def _counter(map_fd: bsys.Fd) -> tuple[int, int]:
    key, value = ctypes.c_uint32(0), ctypes.create_string_buffer(16)
    assert bsys.map_lookup_elem(map_fd, key, value)
    return struct.unpack("<QQ", value.raw)


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
    with ExitStack() as stack:
        maps = [stack.enter_context(bsys.map_create(MapType.ARRAY, 4, 16, 1)) for _ in range(3)]
        btf_id = Btf.vmlinux().find_ids("bpf_fentry_test1", "func")[0]
        fentry = stack.enter_context(
            bsys.prog_load(
                ProgType.TRACING,
                counter_prog(maps[0].fd, 0),  # args[0] of the tracing context
                expected_attach_type=AttachType.TRACE_FENTRY,
                attach_btf_id=btf_id,
            )
        )
        stack.enter_context(bsys.link_create_tracing(fentry, AttachType.TRACE_FENTRY))
        for m, ret, off in ((maps[1], False, PT_REGS_DI), (maps[2], True, PT_REGS_AX)):
            prog = stack.enter_context(bsys.prog_load(ProgType.KPROBE, counter_prog(m.fd, off)))
            ev = stack.enter_context(perf.open_kprobe("bpf_fentry_test1", retprobe=ret))
            ev.set_bpf(prog)
            ev.enable()

        assert [_counter(m) for m in maps] == [(0, 0)] * 3
        assert bsys.prog_test_run(fentry).retval == 0
        # bpf_fentry_test1(int a) returns a + 1; the test run calls it once with a = 1.
        assert _counter(maps[0]) == (1, 1)
        assert _counter(maps[1]) == (1, 1)
        assert _counter(maps[2]) == (1, 2)


def test_feature_probes_find_the_hooks_the_host_lacks(tmp_path: Path) -> None:
    """bpfmux's own feature probes (fresh, not from a cache) see kprobe_multi, fentry/fexit/fmod_ret, sessions."""
    from bpfmux.live.features import Features
    from bpfmux.uapi import LinkType

    f = Features(cache_dir=tmp_path)
    for probe in (
        f.link_type(LinkType.KPROBE_MULTI),
        f.link_type(LinkType.TRACING),
        f.link_type(LinkType.PERF_EVENT),
        f.prog_type(ProgType.KPROBE),
        f.attach_type(AttachType.TRACE_FENTRY),
        f.attach_type(AttachType.TRACE_FEXIT),
        f.attach_type(AttachType.MODIFY_RETURN),
        f.attach_type(AttachType.TRACE_KPROBE_MULTI),
        f.attach_type(AttachType.TRACE_KPROBE_SESSION),
    ):
        assert probe.supported, probe
    table = f.table()
    share = os.environ.get("BPFMUX_VMTEST_SHARE")
    if share:  # the host side prints what the guest supports
        Path(share, "features.json").write_text(json.dumps(table))
    assert table["link_types"]["kprobe_multi"]["supported"]
    assert table["attach_types"]["trace_fentry"]["supported"]


def test_bpfmux_features_command_reports_kprobe_multi_and_fentry() -> None:
    from bpfmux.cli.main import SUBCOMMANDS

    assert "features" in SUBCOMMANDS
    proc = subprocess.run(
        [sys.executable, "-m", "bpfmux.cli.main", "features", "--json"], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    table = json.loads(proc.stdout)
    assert table["link_types"]["kprobe_multi"]["supported"], table["link_types"]
    assert table["attach_types"]["trace_fentry"]["supported"], table["attach_types"]


def _cli() -> list[str]:
    exe = shutil.which("bpfmux")  # the installed console script, as a user would run it
    return [exe] if exe else [sys.executable, "-m", "bpfmux.cli.main"]


def test_bpfmux_features_table_shows_kprobe_multi_and_fentry_supported() -> None:
    """The human-readable table of `bpfmux features` (the host side prints these rows in its summary)."""
    proc = subprocess.run(
        [*_cli(), "features", "--only", "link_types", "--only", "attach_types"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "120"},
    )
    assert proc.returncode == 0, proc.stderr
    share = os.environ.get("BPFMUX_VMTEST_SHARE")
    if share:
        Path(share, "features.txt").write_text(proc.stdout)
    rows = {}
    for line in proc.stdout.splitlines():
        cells = [c.strip() for c in line.strip().strip("│").split("│")]
        if len(cells) >= 2 and cells[0]:
            rows.setdefault(cells[0], cells[1])
    for name in ("kprobe_multi", "tracing", "trace_fentry", "trace_fexit", "modify_return", "trace_kprobe_multi"):
        assert rows.get(name) == "yes", (name, proc.stdout)

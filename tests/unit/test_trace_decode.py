"""Decoding --args events, /proc/PID/maps parsing, the syscall table, and the
generated programs (they assemble and keep the documented layouts)."""

from __future__ import annotations

import os
import re
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bpfmux.abi.ptregs import reg_offset
from bpfmux.abi.syscalls import X86_64, syscall_number
from bpfmux.errors import ParseError
from bpfmux.trace import progs as P
from bpfmux.trace.decode import decode_event
from bpfmux.trace.plan import Mechanism as M
from bpfmux.trace.plan import Probe
from bpfmux.trace.symbolize import parse_maps


def _event(idx: int, payload: bytes, string: bytes = b"") -> bytes:
    head = P.EVENT.pack(123_000_000_000, idx, 42, 43, 1, b"cat".ljust(16, b"\0"))
    return head + payload.ljust(P.PAYLOAD_SIZE, b"\0") + string.ljust(P.STR_SIZE, b"\0")


def test_syscall_exit_event():
    probes = [Probe(0, "tracepoint:syscalls:sys_exit_openat", {"syscall": 257})]
    ev = decode_event(_event(0, struct.pack("<q", -2)), probes, {0: (M.SYS_EXIT, False)})
    assert (ev.pid, ev.tid, ev.comm, ev.args) == (42, 43, "cat", [("ret", -2)])
    assert ev.line() == "123.000000 cat 42/43 tracepoint:syscalls:sys_exit_openat ret=-2"


def test_uprobe_regs_and_return():
    regs = bytearray(168)
    for i, r in enumerate(("di", "si", "dx", "cx", "r8", "r9")):
        struct.pack_into("<Q", regs, reg_offset(r), 100 + i)
    struct.pack_into("<q", regs, reg_offset("ax"), -5)
    probes = [Probe(0, "uprobe:/bin/x:f"), Probe(1, "uretprobe:/bin/x:f")]
    ev = decode_event(_event(0, bytes(regs)), probes, {0: (M.UPROBE_MULTI, False), 1: (M.UPROBE_MULTI, True)})
    assert [(n, str(v)) for n, v in ev.args] == [(f"arg{i}", hex(100 + i)) for i in range(6)]
    assert ev.as_dict()["args"]["arg0"] == "0x64" and "arg0=0x64 " in ev.line()
    ev = decode_event(_event(1, bytes(regs)), probes, {0: (M.UPROBE_MULTI, False), 1: (M.UPROBE_MULTI, True)})
    assert ev.args == [("ret", -5)]
    assert ev.as_dict()["args"] == {"ret": -5}
    struct.pack_into("<Q", regs, reg_offset("ax"), 0xFFFFFFFF)  # an int -1 in eax
    ev = decode_event(_event(1, bytes(regs)), probes, {0: (M.UPROBE_MULTI, False), 1: (M.UPROBE_MULTI, True)})
    assert ev.line().endswith("ret=-1 (0xffffffff)") and ev.as_dict()["args"] == {"ret": -1}


def test_short_or_unknown_events_raise_parse_error():
    with pytest.raises(ParseError):
        decode_event(b"\0" * 10, [], {})
    with pytest.raises(ParseError):
        decode_event(_event(5, b""), [Probe(0, "x")], {})


@given(st.binary(min_size=0, max_size=P.EVENT_SIZE + 8), st.sampled_from(
    [(M.SYS_EXIT, False), (M.UPROBE_MULTI, False), (M.UPROBE_MULTI, True), (M.RAW_TP, False), (M.KPROBE, False)]))
def test_fuzz_decode(raw, how):
    probes = [Probe(0, "p", {"raw_tp": "sched_switch", "function": "vfs_read"})]
    try:
        ev = decode_event(raw, probes, {0: how})
    except ParseError:
        return
    assert ev.probe == "p"


def test_parse_maps():
    text = ("00400000-00452000 r-xp 00001000 08:02 173521 /usr/bin/dbus-daemon\n"
            "00651000-00652000 rw-p 00051000 08:02 173521 /usr/bin/dbus-daemon\n"
            "7fff0000-7fff1000 r-xp 00000000 00:00 0 [vdso]\n"
            "garbage line\n"
            "zz-yy r-xp 0 0 0 /x\n")
    assert parse_maps(text) == [(0x400000, 0x452000, 0x1000, "/usr/bin/dbus-daemon")]


def test_syscall_names():
    assert syscall_number("sys_enter_getpid") == 39
    assert syscall_number("sys_exit_newfstatat") == 262
    assert syscall_number("sys_enter_newstat") == 4
    assert syscall_number("sys_enter_sendfile64") == 40
    assert syscall_number("sys_enter_umount") == 166
    assert syscall_number("sys_enter_nonexistent") is None


@pytest.mark.skipif(not os.path.exists("/usr/include/x86_64-linux-gnu/asm/unistd_64.h"),
                    reason="the uapi header (linux-libc-dev) is not installed")
def test_table_matches_uapi_header():
    nr = {}
    with open("/usr/include/x86_64-linux-gnu/asm/unistd_64.h") as f:
        for line in f:
            m = re.match(r"#define __NR_(\w+) (\d+)", line)
            if m:
                nr[m.group(1)] = int(m.group(2))
    assert nr and all(X86_64[k] == v for k, v in nr.items())


@pytest.mark.parametrize("action", list(P.Action))
@pytest.mark.parametrize("idx", list(P.IdxSource))
def test_programs_assemble(action, idx):
    spec = P.Spec(action, idx, imm=3, filters=P.Filters(pid=7, comm="bash"), min_latency=1 << 33,
                  payload=P.Payload.SYSCALL_REGS)
    prog = P.build(spec)
    refs = {r.ref for r in prog.relocations}
    if idx is P.IdxSource.SYSCALL_ENTER:
        assert "sysidx" in refs
    if idx is P.IdxSource.SYSCALL_EXIT:
        assert "sysidx_exit" in refs
    if action is P.Action.LAT_SESSION:
        assert {"bpf_session_cookie", "bpf_session_is_return"} <= refs
    if action is P.Action.COUNT:
        assert "counts" in refs
    if action is P.Action.ARGS:
        assert {"events", "drops"} <= refs
    assert prog.insns[-1].opcode == 0x95  # exit


def test_no_btf_message(monkeypatch, tmp_path):
    from bpfmux.btf import Btf
    from bpfmux.errors import NotSupportedError
    from bpfmux.live import LiveKernel

    def missing(*a, **k):
        raise FileNotFoundError(2, "No such file or directory")

    monkeypatch.setattr(Btf, "vmlinux", classmethod(lambda cls, *a, **k: missing()))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # no BTF ids remembered from an earlier run
    with pytest.raises(NotSupportedError) as e:
        LiveKernel().btf_id("bpf_session_cookie", "func")
    assert "kernel's BTF" in str(e.value) and "CONFIG_DEBUG_INFO_BTF" in str(e.value)

"""Context layouts and the tracefs format parser (facts of Linux 6.18, x86-64)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bpfmux.abi import ArgInfo, FrameView, context_for, frame_layout
from bpfmux.abi.ptregs import PT_REGS_SIZE, arg_offset, pack_pt_regs, reg_offset, unpack_pt_regs
from bpfmux.abi.tpformat import bundled_events, load_format, parse_format
from bpfmux.errors import NotFoundError, NotSupportedError, ParseError
from bpfmux.uapi import AttachType, ProgType

SCHED_SWITCH = """name: sched_switch
ID: 372
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;
\tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;
\tfield:__data_loc char[] name;\toffset:28;\tsize:4;\tsigned:0;

print fmt: "prev_comm=%s", REC->prev_comm
"""


def test_pt_regs_layout() -> None:
    assert PT_REGS_SIZE == 168
    assert reg_offset("di") == 112 and reg_offset("ip") == 128 and reg_offset("sp") == 152
    assert arg_offset(1) == 112 and arg_offset(5) == 72 and arg_offset(6) == 64
    assert unpack_pt_regs(pack_pt_regs({"di": 7, "ax": -1}))["ax"] == (1 << 64) - 1
    with pytest.raises(NotFoundError):
        reg_offset("eax")
    with pytest.raises(ParseError):
        unpack_pt_regs(b"\0" * 10)


@pytest.mark.parametrize(("ptype", "off", "size", "write", "ok"), [
    (ProgType.KPROBE, 160, 8, False, True),
    (ProgType.KPROBE, 164, 4, False, True),
    (ProgType.KPROBE, 168, 8, False, False),
    (ProgType.KPROBE, 2, 4, False, False),
    (ProgType.KPROBE, 0, 8, True, False),
    (ProgType.TRACEPOINT, 4, 4, False, False),
    (ProgType.TRACEPOINT, 8184, 8, False, True),
    (ProgType.TRACEPOINT, 8192, 8, False, False),
    (ProgType.PERF_EVENT, 0, 4, False, False),
    (ProgType.PERF_EVENT, 172, 4, False, True),
    (ProgType.PERF_EVENT, 184, 8, False, False),
    (ProgType.RAW_TRACEPOINT, 88, 8, False, True),
    (ProgType.RAW_TRACEPOINT, 96, 8, False, False),
    (ProgType.SOCKET_FILTER, 0, 4, False, True),
    (ProgType.SOCKET_FILTER, 0, 4, True, False),
    (ProgType.SOCKET_FILTER, 48, 4, True, True),
    (ProgType.SOCKET_FILTER, 72, 4, False, False),
])
def test_context_rules(ptype: int, off: int, size: int, write: bool, ok: bool) -> None:
    assert context_for(ptype).check(off, size, write).ok is ok


def test_tracing_frames() -> None:
    args = [ArgInfo("a", 4), ArgInfo("p", 8, True, "task_struct")]
    fentry = frame_layout(FrameView.FENTRY, args, None, "f")
    assert fentry.check(8, 8, False).load == "ptr_to_btf_id"
    assert not fentry.check(16, 8, False).ok
    assert "not multiple of 8" in fentry.check(4, 4, False).reason
    fexit = frame_layout(FrameView.FEXIT, args, ArgInfo("ret"), "f")
    assert fexit.check(16, 8, False).ok and not fexit.check(24, 8, False).ok
    seed = context_for(ProgType.TRACING, AttachType.TRACE_FENTRY, multi_func=True)
    assert seed.check(56, 8, False).ok and not seed.check(64, 8, False).ok
    mainline = context_for(ProgType.TRACING, AttachType.TRACE_FENTRY_MULTI)
    assert mainline.check(40, 8, False).ok and not mainline.check(48, 8, False).ok
    assert not seed.check(0, 8, True).ok
    with pytest.raises(NotSupportedError):
        context_for(ProgType.TRACING, AttachType.CGROUP_DEVICE)


def test_parse_format() -> None:
    f = parse_format(SCHED_SWITCH, "sched")
    assert (f.system, f.name, f.id) == ("sched", "sched_switch", 372)
    assert [x.name for x in f.fields if x.common] == ["common_type", "common_flags", "common_preempt_count",
                                                      "common_pid"]
    comm = f.field("prev_comm")
    assert (comm.offset, comm.size, comm.array_len, comm.type) == (8, 16, 16, "char[16]")
    assert f.field("prev_pid").signed
    assert f.field("name").data_loc
    assert f.size == 32
    assert f.print_fmt.startswith('"prev_comm')
    strict = f.layout(strict=True)
    assert strict.check(24, 4, False).ok and not strict.check(32, 8, False).ok
    assert f.layout().check(4000, 8, False).ok


def test_bundled_snapshot() -> None:
    events = bundled_events()
    assert "sched/sched_switch" in events and len(events) > 1000
    f = load_format("syscalls", "sys_enter_openat", use_tracefs=False)
    assert f.field("filename").offset == 24
    with pytest.raises(NotFoundError):
        load_format("nosuch", "event", use_tracefs=False)
    with pytest.raises(NotFoundError):
        load_format("../etc", "passwd")


@pytest.mark.parametrize("text", ["", "name: x\n", "ID: 3\n", "name: x\nID: y\n",
                                  "name: x\nID: 1\nformat:\n\tfield:int a;\toffset:zz;\tsize:4;\n",
                                  "name: x\nID: 1\nbogus line\n"])
def test_parse_format_rejects(text: str) -> None:
    with pytest.raises(ParseError):
        parse_format(text)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400))
def test_parse_format_fuzz(text: str) -> None:
    try:
        f = parse_format(text)
    except ParseError:
        return
    assert f.name is not None


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(SCHED_SWITCH.splitlines(keepends=True)), max_size=20))
def test_parse_format_fuzz_lines(lines: list[str]) -> None:
    try:
        parse_format("".join(lines))
    except ParseError:
        pass


def test_func_args_from_btf() -> None:
    from bpfmux.abi.tracing import func_args_from_btf
    from bpfmux.btf.builder import BtfBuilder

    b = BtfBuilder()
    i32 = b.int("int", 4, signed=True)
    sock = b.struct("sock", [("x", i32)])
    b.func("f", b.func_proto(i32, [("sk", b.ptr(sock)), ("n", i32), ("p", b.ptr(i32))]))
    args, ret = func_args_from_btf(b.btf, "f")
    assert args == [ArgInfo("sk", 8, True, "sock"), ArgInfo("n", 4, False, None, True), ArgInfo("p", 8, True)]
    assert ret == ArgInfo("ret", 4, False, None, True)
    with pytest.raises(NotFoundError):
        func_args_from_btf(b.btf, "g")

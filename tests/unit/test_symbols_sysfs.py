"""Names the kernel publishes in sysfs/tracefs, turned into numbers:
PMU format bits, CPU lists, tracepoint names, perf_event_attr packing."""

from __future__ import annotations

import ctypes

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bpfmux.errors import ParseError
from bpfmux.host.cpus import parse_cpu_list
from bpfmux.host.tracefs import split_tracepoint
from bpfmux.live import sys as lsys
from bpfmux.live.perf import make_attr, parse_format_bit


def test_format_bit():
    assert parse_format_bit("config:0") == 0
    assert parse_format_bit("config:63\n".strip()) == 63
    for bad in ["config:0-5", "config1:3", "config", "config:64", "config:-1", ""]:
        with pytest.raises(ParseError):
            parse_format_bit(bad)


@given(st.text(max_size=20))
def test_fuzz_format_bit(text):
    try:
        assert 0 <= parse_format_bit(text) <= 63
    except ParseError:
        pass


def test_cpu_list():
    assert parse_cpu_list("0-3,6") == [0, 1, 2, 3, 6]
    assert parse_cpu_list("0") == [0]
    assert parse_cpu_list("0-1\n".strip()) == [0, 1]
    for bad in ["3-1", "a", "1-", "-1", "0-70000"]:
        with pytest.raises(ParseError):
            parse_cpu_list(bad)


@given(st.text(alphabet="0123456789,-x ", max_size=20))
def test_fuzz_cpu_list(text):
    try:
        cpus = parse_cpu_list(text)
    except ParseError:
        return
    assert all(c >= 0 for c in cpus)


def test_split_tracepoint():
    assert split_tracepoint("sched:sched_switch") == ("sched", "sched_switch")
    assert split_tracepoint("syscalls/sys_enter_read") == ("syscalls", "sys_enter_read")
    for bad in ["sched", ":x", "x:", "a:b:c", "a/b/c"]:
        with pytest.raises(ParseError):
            split_tracepoint(bad)


def test_make_attr_layout():
    attr = make_attr(2, 842, sample_period=1, wakeup_events=1, flags={"disabled", "freq"}, config1=7, config2=9)
    raw = bytes(attr)
    assert len(raw) == 136 == attr.size
    assert int.from_bytes(raw[0:4], "little") == 2
    assert int.from_bytes(raw[8:16], "little") == 842
    assert int.from_bytes(raw[16:24], "little") == 1
    assert int.from_bytes(raw[40:48], "little") == (1 << 0) | (1 << 10)
    assert int.from_bytes(raw[48:52], "little") == 1
    assert int.from_bytes(raw[56:64], "little") == 7
    assert int.from_bytes(raw[64:72], "little") == 9
    assert ctypes.sizeof(lsys.PerfEventAttr) == 136
    with pytest.raises(ParseError):
        make_attr(1, flags={"no_such_flag"})
    with pytest.raises(ParseError):
        make_attr(1, 1 << 64)

"""Attach-target text: ``BINARY:SYMBOL[+OFF]``/``BINARY:0xOFF`` for uprobes,
``FUNC[+OFF]``/``0xADDR`` for kprobes (parsers fuzzed)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bpfmux.errors import ParseError
from bpfmux.host.targets import KprobeTarget, UprobeTarget, parse_kprobe_target, parse_uprobe_target


@pytest.mark.parametrize("spec,want", [
    ("libc.so.6:getpid", UprobeTarget("libc.so.6", "getpid", 0)),
    ("/lib/x/libc.so.6:getpid+0x10", UprobeTarget("/lib/x/libc.so.6", "getpid", 16)),
    ("/usr/bin/bash:0x1f00", UprobeTarget("/usr/bin/bash", None, 0x1F00)),
    ("c:str*", UprobeTarget("c", "str*", 0)),
    ("libc.so.6:getpid@@GLIBC_2.2.5", UprobeTarget("libc.so.6", "getpid@@GLIBC_2.2.5", 0)),
    ("/proc/self/exe:main", UprobeTarget("/proc/self/exe", "main", 0)),
    ("/odd:dir/lib.so:f", UprobeTarget("/odd:dir/lib.so", "f", 0)),
])  # fmt: skip
def test_uprobe_targets(spec, want):
    assert parse_uprobe_target(spec) == want


@pytest.mark.parametrize("bad", ["getpid", ":getpid", "libc.so.6:", "libc:+4", "libc:f+zz", "libc:0xzz", "libc:f+-1"])
def test_uprobe_target_errors(bad):
    with pytest.raises(ParseError):
        parse_uprobe_target(bad)


@pytest.mark.parametrize("spec,want", [
    ("do_nanosleep", KprobeTarget("do_nanosleep", 0, 0)),
    ("do_nanosleep+0x4", KprobeTarget("do_nanosleep", 4, 0)),
    ("0xffffffff81000000", KprobeTarget(None, 0, 0xFFFFFFFF81000000)),
])  # fmt: skip
def test_kprobe_targets(spec, want):
    assert parse_kprobe_target(spec) == want


@pytest.mark.parametrize("bad", ["", "+4", "f+", "f+x", "a b", "0xq"])
def test_kprobe_target_errors(bad):
    with pytest.raises(ParseError):
        parse_kprobe_target(bad)


@given(st.text(max_size=40))
def test_fuzz_targets(text):
    for parse in (parse_uprobe_target, parse_kprobe_target):
        try:
            t = parse(text)
        except ParseError:
            continue
        assert t.offset >= 0

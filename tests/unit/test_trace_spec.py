"""Probe spec parsing (bpftrace spelling, aliases, globs) and its errors."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bpfmux.errors import ParseError
from bpfmux.trace.spec import parse_probe, parse_probes, validate_glob


@pytest.mark.parametrize(
    ("text", "kind", "category", "path", "name", "rate"),
    [
        ("tracepoint:syscalls:sys_enter_*", "tracepoint", "syscalls", "", "sys_enter_*", 0),
        ("t:sched:sched_switch", "tracepoint", "sched", "", "sched_switch", 0),
        ("rawtracepoint:sched_switch", "rawtracepoint", "", "", "sched_switch", 0),
        ("rt:sched:sched_*", "rawtracepoint", "sched", "", "sched_*", 0),
        ("uprobe:/usr/lib/x86_64-linux-gnu/libc.so.6:str*", "uprobe", "", "/usr/lib/x86_64-linux-gnu/libc.so.6",
         "str*", 0),
        ("u:libc:malloc", "uprobe", "", "libc", "malloc", 0),
        ("uretprobe:libc:malloc", "uretprobe", "", "libc", "malloc", 0),
        ("uprobe:/bin/true:0x1000", "uprobe", "", "/bin/true", "0x1000", 0),
        ("uprobe:libc:getpid+4", "uprobe", "", "libc", "getpid+4", 0),
        ("kprobe:vfs_*", "kprobe", "", "", "vfs_*", 0),
        ("kr:vfs_read", "kretprobe", "", "", "vfs_read", 0),
        ("kprobe:ext4:ext4_*", "kprobe", "ext4", "", "ext4_*", 0),
        ("fentry:vfs_read", "fentry", "", "", "vfs_read", 0),
        ("kfunc:vfs_read", "fentry", "", "", "vfs_read", 0),
        ("fexit:vfs_read", "fexit", "", "", "vfs_read", 0),
        ("profile:hz:99", "profile", "", "", "hz", 99),
        ("p:ms:10", "profile", "", "", "ms", 10),
        ("software:page-faults:100", "software", "", "", "page-faults", 100),
        ("s:cs", "software", "", "", "cs", 1000),
    ],
)
def test_parse_forms(text, kind, category, path, name, rate):
    p = parse_probe(text)
    assert (p.kind, p.category, p.path, p.name, p.rate) == (kind, category, path, name, rate)
    assert parse_probe(p.canonical).canonical == p.canonical


def test_globs_and_several():
    specs = parse_probes(["t:sched:*,t:syscalls:sys_enter_[ab]*", "k:vfs_read"])
    assert [s.kind for s in specs] == ["tracepoint", "tracepoint", "kprobe"]
    assert specs[0].is_glob and specs[1].is_glob and not specs[2].is_glob
    assert specs[1].name == "sys_enter_[ab]*"


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("syscalls:sys_enter_openat", "unknown probe kind 'syscalls'"),
        ("tracepoint", "no ':'"),
        ("tracepoint:syscalls", "missing ':' between subsystem and name"),
        ("tracepoint:sched:sched_[abc", "no matching ']'"),
        ("tracepoint:sched:sched]", "without '['"),
        ("tracepoint:sched:", "empty tracepoint name"),
        ("uprobe:str*", "missing binary path"),
        ("uprobe:/usr/lib/*/libc.so.6:malloc", "globs are allowed in the function name only"),
        ("uprobe:libc:", "empty function name"),
        ("uprobe:libc:str*+4", "an offset needs one function"),
        ("kprobe:a:b:c", "too many ':'"),
        ("kprobe:", "empty function name"),
        ("fentry:vfs_read+4", "offset is only allowed on one kprobe"),
        ("profile:hz:0", "not a positive integer"),
        ("profile:minutes:1", "unit must be one of"),
        ("software:bogus:1", "unknown software event"),
        ("software:cs:x", "not a positive integer"),
    ],
)
def test_errors_say_what_to_do(text, fragment):
    with pytest.raises(ParseError) as e:
        parse_probe(text)
    assert fragment in str(e.value)


def test_empty_list():
    with pytest.raises(ParseError, match="no probe given"):
        parse_probes([" , "])


def test_validate_glob():
    validate_glob("a[!b]c*", "name", "x")
    with pytest.raises(ParseError):
        validate_glob("a[]", "name", "x")


@given(st.text(max_size=60))
def test_fuzz_only_parse_errors(text):
    try:
        p = parse_probe(text)
    except ParseError:
        return
    assert p.kind in ("tracepoint", "rawtracepoint", "uprobe", "uretprobe", "kprobe", "kretprobe", "fentry",
                      "fexit", "profile", "software")


@given(st.sampled_from(["t", "tracepoint", "rt", "u", "ur", "k", "kr", "f", "fr", "p", "s"]),
       st.text(alphabet="ab*?[]:/+-_0x1.", max_size=25))
def test_fuzz_kinds(kind, rest):
    try:
        parse_probe(f"{kind}:{rest}")
    except ParseError:
        pass

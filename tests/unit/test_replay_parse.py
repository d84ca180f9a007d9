"""Call streams and workload specs of ``bpfmux emulate``: parsed exactly, garbage refused with ParseError."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bpfmux.emu.kernel.replay import parse_calls, parse_workload
from bpfmux.errors import ParseError


def test_stream_events():
    evs = list(parse_calls([
        '{"call": "f", "args": [1, 2], "repeat": 3}',
        "",
        "# comment",
        '{"fire": "sched:sched_switch", "args": [0], "fields": {"prev_pid": 7}}',
        '{"kprobe": "g", "args": []}',
        '{"test_run": true}',
        '{"test_run": "prog"}',
        '{"task": {"pid": 4, "comm": "x"}}',
        '{"clock": 99}',
    ]))
    assert [(e.kind, e.target, e.args, e.repeat) for e in evs] == [
        ("call", "f", (1, 2), 3), ("fire", "sched:sched_switch", (0,), 1), ("kprobe", "g", (), 1),
        ("test_run", "", (), 1), ("test_run", "prog", (), 1), ("task", "", (), 1), ("clock", "", (99,), 1)]
    assert evs[1].fields == {"prev_pid": 7} and evs[5].fields == {"pid": 4, "comm": "x"}
    assert evs[0].line == 1 and evs[1].line == 4


def test_workload_items():
    evs = parse_workload("bpf_fentry_test2(1, 0x10)*5, tp:sched:sched_switch*2,test_run,f()")
    assert [(e.kind, e.target, e.args, e.repeat) for e in evs] == [
        ("call", "bpf_fentry_test2", (1, 16), 5), ("fire", "sched:sched_switch", (), 2),
        ("test_run", "", (), 1), ("call", "f", (), 1)]


@pytest.mark.parametrize("line", ['[1]', '{"call": "f", "kprobe": "g"}', '{"call": "f", "args": ["x"]}',
                                  '{"call": "f", "repeat": -1}', '{"call": ""}', '{"clock": "soon"}', "{"])
def test_bad_lines(line):
    with pytest.raises(ParseError) as ei:
        list(parse_calls([line], "calls.jsonl"))
    assert "line 1" in str(ei.value) and "calls.jsonl" in str(ei.value)


@settings(max_examples=2000, deadline=None)
@given(st.lists(st.text(max_size=60), max_size=4))
def test_stream_fuzz_only_parse_errors(lines):
    try:
        list(parse_calls(lines))
    except ParseError:
        pass


@settings(max_examples=2000, deadline=None)
@given(st.text(max_size=80))
def test_workload_fuzz_only_parse_errors(spec):
    try:
        parse_workload(spec)
    except ParseError:
        pass


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
                    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=6), c, max_size=3), max_leaves=8)
KEYS = st.sampled_from(["call", "fire", "kprobe", "test_run", "task", "clock", "args", "fields", "repeat", "x"])


@settings(max_examples=2000, deadline=None)
@given(st.dictionaries(KEYS, JSON, max_size=4))
def test_stream_objects_fuzz_only_parse_errors(obj):
    import json

    try:
        list(parse_calls([json.dumps(obj)]))
    except ParseError:
        pass


@pytest.mark.parametrize("task", ['{"pid": "x"}', '{"nice": 1}', '{"comm": 5}', '{"pid": true}', '[]'])
def test_bad_task(task):
    with pytest.raises(ParseError):
        list(parse_calls(['{"task": ' + task + '}']))

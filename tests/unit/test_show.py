"""What bpfmux run and emulate show: values as text, slots histograms, map
readings (per-CPU sums, interval differences, sorting), record types from
BTF and DWARF."""

from __future__ import annotations

from pathlib import Path

import pytest

from bpfmux.errors import InvalidArgumentError, NotFoundError
from bpfmux.obj import load_object
from bpfmux.show.events import EventTypes
from bpfmux.show.hist import HistSpec, draw, find_slots, parse_hist_spec
from bpfmux.show.maps import Reading, render, since, sum_percpu
from bpfmux.show.values import plain, sort_key, text, total
from bpfmux.uapi import MapType

BPF = Path(__file__).resolve().parents[1] / "bpf"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "objects"


class TestValues:
    def test_char_arrays(self) -> None:
        assert plain(b"bash\0\0\0\0") == "bash"
        assert plain(b"/bin/true\0hello\0\0\0") == ["/bin/true", "hello"]  # an argv
        assert plain(b"/tmp/f\0garbage\xff\x01") == "/tmp/f"  # a reused buffer's leftovers
        assert plain(b"\x01\x02\xff") == "0102ff"
        assert text(b"\0" * 300) == '""' and text(bytes(range(1, 200))).startswith("<199 bytes: ")

    def test_long_mostly_zero_arrays_show_their_non_zero_elements(self) -> None:
        v = [0] * 64
        v[3], v[40] = 7, 1
        assert text(v) == "[64 × 0; except 3: 7, 40: 1]"
        assert text([1, 2, 3]) == "[1, 2, 3]"

    def test_records_and_enums(self) -> None:
        from bpfmux.btf.codec import EnumInt

        assert text({"a": 1, "b": [1, 2], "name": b"x\0"}) == '{a: 1, b: [1, 2], name: "x"}'
        assert plain(EnumInt(2, "UMOUNT")) == "UMOUNT" and text(EnumInt(9, None)) == "9"

    def test_sorting_and_totals(self) -> None:
        assert sorted([3, "b", 1, "a"], key=sort_key) == [1, 3, "a", "b"]
        assert total([1, 2, 3]) == 6 and total(5) == 5 and total({"a": 1}) is None


class TestHist:
    def test_log2_draws_the_used_range(self) -> None:
        slots = [0, 0, 5, 52, 10, 0, 0, 0, 0, 0, 0, 1]
        lines = draw(slots)
        assert len(lines) == 10  # slot 2 to slot 11
        assert lines[0].startswith("[4, 8)") and lines[1].split("|")[1].count("@") == 52
        assert lines[-1].startswith("[2K, 4K)") and " 1 |" in lines[-1]
        assert draw([0] * 8) == []
        assert draw([3, 1])[0].startswith("[0, 2)")

    def test_linear(self) -> None:
        assert parse_hist_spec("linear:200:100") == HistSpec("linear", 200, 100)
        assert draw([1, 2], parse_hist_spec("linear:200:100"))[1].startswith("[300, 500)")
        for bad in ("log3", "linear:0", "linear:x"):
            with pytest.raises(InvalidArgumentError):
                parse_hist_spec(bad)

    def test_find_slots(self) -> None:
        assert find_slots({"slots": [1, 2], "comm": "x"}) == ([1, 2], {"comm": "x"})
        assert find_slots({"slots": "x"}) is None and find_slots([1, 2]) is None


class TestMaps:
    def test_percpu_sums_and_interval_differences(self) -> None:
        assert sum_percpu([{"count": 1, "slots": [1, 0]}, {"count": 2, "slots": [0, 3]}]) == \
            {"count": 3, "slots": [1, 3]}
        before = Reading("m", MapType.HASH, [(1, 5), (2, 7)])
        after = Reading("m", MapType.HASH, [(1, 9), (2, 7), (3, 1)])
        assert since(after, before).entries == [(1, 4), (3, 1)]
        assert since(after, None).entries == after.entries

    def test_render_sorts_counts_and_draws_histograms(self) -> None:
        counts = render(Reading("counts", MapType.HASH, [(7, 30), (3, 1), (9, 12)]))
        assert counts == ["counts:", "  3: 1", "  9: 12", "  7: 30"]  # by value, largest last, as bpftrace
        hist = render(Reading("hists", MapType.HASH, [(1, {"slots": [0, 4, 0]})]))
        assert hist[1] == "  1:" and hist[2].lstrip().startswith("[2, 4)")
        arr = render(Reading("a", MapType.ARRAY, [(0, 0), (1, 2), (2, 0)]))
        assert arr == ["a:", "  1: 2", "  (2 entries that are 0 not shown)"]
        bss = render(Reading(".bss", MapType.ARRAY, [("h", [{"slots": [1, 0]}, {"slots": [0, 0]}]), ("n", 3)],
                             section=True))
        assert bss[1] == "  h[0]:" and "n: 3" in bss[-1]


class TestEventTypes:
    def test_btf_struct_of_the_record_size(self) -> None:
        spec = load_object(EXAMPLES / "getpid_events.bpf.o")
        value, match = EventTypes(spec).decode(bytes(32))
        assert match.name == "getpid_event" and match.source == "btf" and value.seq == 0

    def test_perf_padding(self) -> None:
        spec = load_object(EXAMPLES / "getpid_perf.bpf.o")
        assert EventTypes(spec).match(20, perf=True).name == "getpid_sample"  # 16 bytes + 4 of perf padding
        assert EventTypes(spec).match(20).codec is None  # a ring buffer's records are exact

    def test_no_dwarf_no_type(self) -> None:
        """ringbuf.bpf.o reaches its struct event only through a reserved pointer, and its DWARF is stripped."""
        m = EventTypes(load_object(BPF / "ringbuf.bpf.o"), (BPF / "ringbuf.bpf.o").read_bytes()).match(32)
        assert m.codec is None and "no DWARF" in m.why and "--event-type" in m.why

    def test_dwarf_only_struct(self) -> None:
        data = (BPF / "run_tool.bpf.o").read_bytes()
        spec = load_object(data)
        assert all(t.name != "dwarf_event" for t in spec.btf.own_types())
        record = (42).to_bytes(4, "little") + (39).to_bytes(4, "little") + (5).to_bytes(8, "little") + b"py\0".ljust(16, b"\0")
        value, match = EventTypes(spec, data).decode(record)
        assert match.source == "dwarf" and match.name == "dwarf_event"
        assert (value.tgid, value.nr, value.seq, value.comm) == (42, 39, 5, b"py".ljust(16, b"\0"))

    def test_named_type_and_unknown_sizes(self) -> None:
        data = (BPF / "run_tool.bpf.o").read_bytes()
        spec = load_object(data)
        assert EventTypes(spec, data, "hist").match(3).name == "hist"
        with pytest.raises(NotFoundError):
            EventTypes(spec, data, "no_such_struct")
        m = EventTypes(spec, data).match(5)
        assert m.codec is None and "--event-type" in m.why

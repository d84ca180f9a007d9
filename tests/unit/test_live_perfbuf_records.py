"""Perf buffer record parsing without a kernel: the reader runs over a ring
written by the test into an anonymous mapping with the perf ring layout
(``perf_event_mmap_page`` header page, then the data pages)."""

from __future__ import annotations

import mmap
import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from bpfmux.live.perfbuf import _HEAD_OFF, _PAGE, _TAIL_OFF, PERF_RECORD_LOST, PERF_RECORD_SAMPLE, PerfBuffer, _CpuRing

CPU = 3
HDR = struct.Struct("<IHH")


def _reader(records: bytes, *, start: int = 0, pages: int = 1) -> tuple[PerfBuffer, _CpuRing, list]:
    """A reader with one CPU ring holding ``records`` from ring position ``start``."""
    size = pages * _PAGE
    ring = _CpuRing.__new__(_CpuRing)
    ring.cpu, ring.fd, ring.size, ring.mask = CPU, None, size, size - 1
    ring.mm = mmap.mmap(-1, _PAGE + size)
    for i, b in enumerate(records):
        ring.mm[_PAGE + ((start + i) & ring.mask)] = b
    struct.pack_into("<Q", ring.mm, _TAIL_OFF, start)
    struct.pack_into("<Q", ring.mm, _HEAD_OFF, start + len(records))
    notes: list[tuple[int, int]] = []
    pb = PerfBuffer.__new__(PerfBuffer)
    pb.callback, pb.lost_callback = None, lambda cpu, n: notes.append((cpu, n))
    pb._decode = None
    pb.lost, pb.malformed, pb.delivered = {}, 0, 0
    pb._rings = {0: ring}
    pb._closed = False
    return pb, ring, notes


def _record(rtype: int, body: bytes) -> bytes:
    return HDR.pack(rtype, 0, 8 + len(body)) + body


def _sample(raw: bytes) -> bytes:
    return _record(PERF_RECORD_SAMPLE, struct.pack("<I", len(raw)) + raw)


def _tail(ring: _CpuRing) -> int:
    return struct.unpack_from("<Q", ring.mm, _TAIL_OFF)[0]


def test_records_too_short_for_their_fields_count_as_lost_and_reading_goes_on() -> None:
    stream = (_sample(b"A" * 12)
              + _record(PERF_RECORD_SAMPLE, b"")              # no room for the u32 raw size
              + _record(PERF_RECORD_SAMPLE, b"\x01\x02")      # half of it
              + _record(PERF_RECORD_LOST, b"\0" * 8)          # id but no count
              + _sample(b"B" * 4)
              + _record(PERF_RECORD_LOST, struct.pack("<QQ", 1, 5)))
    pb, ring, notes = _reader(stream, start=_PAGE - 20)  # the stream wraps around the data area
    try:
        assert pb.drain() == [(CPU, b"A" * 12), (CPU, b"B" * 4)]
        assert pb.malformed == 3
        assert pb.lost == {CPU: 1 + 1 + 1 + 5}
        assert notes == [(CPU, 1), (CPU, 1), (CPU, 1), (CPU, 5)]
        assert _tail(ring) == _PAGE - 20 + len(stream)
        assert pb.drain() == []
    finally:
        ring.mm.close()


_RECORDS = st.lists(st.tuples(st.sampled_from([PERF_RECORD_SAMPLE, PERF_RECORD_LOST, 1, 14]),
                              st.binary(max_size=40)), max_size=20)


@settings(max_examples=300, deadline=None)
@given(records=_RECORDS, start=st.integers(0, _PAGE - 1))
def test_fuzzed_record_streams_never_escape_as_struct_errors(records, start) -> None:
    stream = b"".join(_record(t, body) for t, body in records)
    short = sum(1 for t, body in records
                if (t == PERF_RECORD_SAMPLE and len(body) < 4) or (t == PERF_RECORD_LOST and len(body) < 16))
    pb, ring, _notes = _reader(stream, start=start)
    try:
        got = pb.drain()
        assert len(got) == sum(1 for t, body in records if t == PERF_RECORD_SAMPLE and len(body) >= 4)
        assert pb.malformed == short
        assert _tail(ring) == start + len(stream)
    finally:
        ring.mm.close()

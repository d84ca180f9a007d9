"""Tables, log2 histograms, JSON records and Prometheus text from snapshots."""

from __future__ import annotations

from bpfmux.trace.engine import Snapshot
from bpfmux.trace.plan import Probe
from bpfmux.trace.report import (
    bucket_label,
    count_rows,
    count_text,
    hist_text,
    latency_records,
    latency_text,
    prometheus_text,
)

PROBES = [Probe(0, "tracepoint:syscalls:sys_enter_read"), Probe(1, "tracepoint:syscalls:sys_enter_getpid")]


def test_bucket_labels():
    assert [bucket_label(b) for b in (0, 1, 2, 3, 11, 12, 21)] == [
        "[0]", "[1]", "[2, 4)", "[4, 8)", "[1K, 2K)", "[2K, 4K)", "[1M, 2M)"]


def test_hist_bars_scale_and_gaps():
    text = hist_text({3: 10, 5: 5})
    lines = text.splitlines()
    assert len(lines) == 3  # bucket 4 shown empty between
    assert lines[0].startswith("[4, 8)") and lines[0].count("@") == 52
    assert lines[1].startswith("[8, 16)") and lines[1].count("@") == 0
    assert lines[2].startswith("[16, 32)") and lines[2].count("@") == 26
    assert all(line.endswith("|") for line in lines)


def test_count_rows_sorted_with_rates():
    prev = Snapshot(10.0, counts={(0, 0, ""): 100, (1, 0, ""): 5})
    snap = Snapshot(12.0, counts={(0, 0, ""): 300, (1, 0, ""): 7})
    rows = count_rows(snap, prev, PROBES)
    assert [(r.probe, r.total, r.rate) for r in rows] == [
        ("tracepoint:syscalls:sys_enter_read", 300, 100.0), ("tracepoint:syscalls:sys_enter_getpid", 7, 1.0)]
    text = count_text(rows, None).splitlines()
    assert text[0].split() == ["PROBE", "COUNT"]
    assert text[1].split() == ["tracepoint:syscalls:sys_enter_read", "300"]
    assert count_rows(snap, prev, PROBES, limit=1)[0].total == 300


def test_count_by_comm_text_and_json():
    snap = Snapshot(1.0, counts={(1, 0, "python3"): 3, (1, 0, "bash"): 9})
    rows = count_rows(snap, None, PROBES)
    assert [r.comm for r in rows] == ["bash", "python3"]
    assert count_text(rows, "comm").splitlines()[0].split() == ["PROBE", "COMM", "COUNT"]
    assert rows[0].as_dict("comm") == {"probe": "tracepoint:syscalls:sys_enter_getpid", "count": 9, "comm": "bash"}


def test_latency_text_and_records():
    snap = Snapshot(1.0, hists={(1, 0, ""): {1: 2, 2: 2}}, latsum={1: 10})
    text = latency_text(snap, PROBES, None)
    assert text.startswith("@ns[tracepoint:syscalls:sys_enter_getpid]: 4 calls, avg 2 ns")
    rec = latency_records(snap, PROBES, None)[0]
    assert rec["calls"] == 4 and rec["total_ns"] == 10
    assert rec["hist"] == [{"lo": 1, "hi": 2, "count": 2}, {"lo": 2, "hi": 4, "count": 2}]


def test_prometheus_text():
    snap = Snapshot(1.0, counts={(0, 0, ""): 5}, hists={(1, 0, ""): {0: 1, 2: 3}}, latsum={1: 9})
    text = prometheus_text(snap, PROBES, None)
    assert 'bpfmux_probe_hits_total{probe="tracepoint:syscalls:sys_enter_read"} 5' in text
    assert 'bpfmux_latency_ns_bucket{probe="tracepoint:syscalls:sys_enter_getpid",le="0"} 1' in text
    assert 'bpfmux_latency_ns_bucket{probe="tracepoint:syscalls:sys_enter_getpid",le="3"} 4' in text
    assert 'bpfmux_latency_ns_bucket{probe="tracepoint:syscalls:sys_enter_getpid",le="+Inf"} 4' in text
    assert 'bpfmux_latency_ns_sum{probe="tracepoint:syscalls:sys_enter_getpid"} 9' in text
    assert "# TYPE bpfmux_probe_hits_total counter" in text

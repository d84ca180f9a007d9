"""Turning :class:`~bpfmux.trace.engine.Snapshot` data into rows, text
tables, log2 histograms drawn as bars, JSON records and Prometheus text.

Rendering is pure (no terminal needed): the command line prints the text,
and :func:`rich_table` builds the live table for a terminal.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Group

    from .engine import Snapshot
    from .plan import Probe

__all__ = [
    "CountRow",
    "bucket_label",
    "count_rows",
    "count_text",
    "hist_text",
    "latency_records",
    "latency_text",
    "prometheus_text",
    "rich_table",
]

_BAR = 52
_SUFFIX = ["", "K", "M", "G", "T", "P", "E"]


@dataclass
class CountRow:
    """One line of the count table."""

    probe: str
    pid: int
    comm: str
    total: int
    rate: float

    def as_dict(self, by: str | None) -> dict[str, Any]:
        """JSON form (``pid``/``comm`` only when split by them)."""
        d: dict[str, Any] = {"probe": self.probe, "count": self.total}
        if by == "pid":
            d["pid"] = self.pid
        if by == "comm":
            d["comm"] = self.comm
        return d


def count_rows(snap: Snapshot, prev: Snapshot | None, probes: Sequence[Probe], limit: int | None = None) -> list[CountRow]:
    """Rows sorted by total (then name); ``rate`` is per second since ``prev``."""
    dt = (snap.time - prev.time) if prev is not None else 0.0
    rows = []
    for (idx, pid, comm), total in snap.counts.items():
        before = prev.counts.get((idx, pid, comm), 0) if prev is not None else 0
        rate = (total - before) / dt if dt > 0 else 0.0
        rows.append(CountRow(probes[idx].name, pid, comm, total, rate))
    rows.sort(key=lambda r: (-r.total, r.probe, r.pid, r.comm))
    return rows[:limit] if limit else rows


def _head(by: str | None) -> list[str]:
    return ["PROBE"] + (["PID"] if by == "pid" else []) + (["COMM"] if by == "comm" else []) + ["COUNT"]


def _cells(r: CountRow, by: str | None) -> list[str]:
    return [r.probe] + ([str(r.pid)] if by == "pid" else []) + ([r.comm] if by == "comm" else []) + [str(r.total)]


def count_text(rows: list[CountRow], by: str | None) -> str:
    """A plain aligned table (no colors), numbers right-aligned."""
    table = [_head(by)] + [_cells(r, by) for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    lines = []
    for row in table:
        cells = [c.ljust(w) for c, w in zip(row[:-1], widths[:-1], strict=True)] + [row[-1].rjust(widths[-1])]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def bucket_label(bucket: int) -> str:
    """``[0]``, ``[1]``, ``[2, 4)``, ``[1K, 2K)`` … for log2 bucket ``bucket``."""
    if bucket <= 1:
        return f"[{bucket}]"
    return f"[{_num(1 << (bucket - 1))}, {_num(1 << bucket)})"


def _num(v: int) -> str:
    i = 0
    while v >= 1024 and v % 1024 == 0 and i < len(_SUFFIX) - 1:
        v //= 1024
        i += 1
    return f"{v}{_SUFFIX[i]}"


def hist_text(buckets: dict[int, int]) -> str:
    """A log2 histogram drawn with bars, from the lowest to the highest
    non-empty bucket (empty ones between are shown)."""
    if not buckets:
        return ""
    lo, hi = min(buckets), max(buckets)
    top = max(buckets.values()) or 1
    labels = [bucket_label(b) for b in range(lo, hi + 1)]
    lw = max(len(s) for s in labels)
    cw = max(len(str(v)) for v in buckets.values())
    lines = []
    for b, label in zip(range(lo, hi + 1), labels, strict=True):
        n = buckets.get(b, 0)
        bar = "@" * (n * _BAR // top if n else 0)
        lines.append(f"{label.ljust(lw)} {str(n).rjust(max(cw, 8))} |{bar.ljust(_BAR)}|")
    return "\n".join(lines)


def _lat_groups(snap: Snapshot, probes: Sequence[Probe]) -> list[tuple[tuple[int, int, str], dict[int, int], int]]:
    out = []
    for key, hist in snap.hists.items():
        out.append((key, hist, sum(hist.values())))
    out.sort(key=lambda x: (-x[2], probes[x[0][0]].name, x[0][1], x[0][2]))
    return out


def latency_text(snap: Snapshot, probes: Sequence[Probe], by: str | None, unit: str = "ns", *,
                 busiest_last: bool = False) -> str:
    """One histogram per probe (and pid/comm), busiest first (``busiest_last``:
    last, as bpftrace prints maps), with count and average."""
    parts = []
    groups = _lat_groups(snap, probes)
    for (idx, pid, comm), hist, n in (groups[::-1] if busiest_last else groups):
        who = f", pid {pid}" if by == "pid" else (f", comm {comm}" if by == "comm" else "")
        avg = ""
        if by is None and idx in snap.latsum and n:
            avg = f", avg {snap.latsum[idx] / n:.0f} ns"
        parts.append(f"@{unit}[{probes[idx].name}{who}]: {n} calls{avg}\n{hist_text(hist)}")
    return "\n\n".join(parts)


def latency_records(snap: Snapshot, probes: Sequence[Probe], by: str | None) -> list[dict[str, Any]]:
    """JSON records: probe, calls, histogram as ``{"lo": ns, "hi": ns, "count": n}`` buckets."""
    out = []
    for (idx, pid, comm), hist, n in _lat_groups(snap, probes):
        rec: dict[str, Any] = {"probe": probes[idx].name, "calls": n}
        if by == "pid":
            rec["pid"] = pid
        if by == "comm":
            rec["comm"] = comm
        if by is None and idx in snap.latsum:
            rec["total_ns"] = snap.latsum[idx]
        rec["hist"] = [{"lo": 0 if b == 0 else 1 << (b - 1), "hi": 1 if b == 0 else 1 << b, "count": c}
                       for b, c in sorted(hist.items())]  # fmt: skip
        out.append(rec)
    return out


def _esc(v: str) -> str:
    return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def prometheus_text(snap: Snapshot, probes: Sequence[Probe], by: str | None) -> str:
    """Prometheus exposition text: ``bpfmux_probe_hits_total`` (count and
    stacks modes) and ``bpfmux_latency_ns`` histograms (latency mode)."""
    lines = []
    if snap.counts:
        lines += ["# HELP bpfmux_probe_hits_total Hits per probe since bpfmux started.",
                  "# TYPE bpfmux_probe_hits_total counter"]  # fmt: skip
        for (idx, pid, comm), n in sorted(snap.counts.items()):
            labels = f'probe="{_esc(probes[idx].name)}"'
            if by == "pid":
                labels += f',pid="{pid}"'
            if by == "comm":
                labels += f',comm="{_esc(comm)}"'
            lines.append(f"bpfmux_probe_hits_total{{{labels}}} {n}")
    if snap.hists:
        lines += ["# HELP bpfmux_latency_ns Entry-to-return time per function, nanoseconds.",
                  "# TYPE bpfmux_latency_ns histogram"]  # fmt: skip
        for (idx, pid, comm), hist in sorted(snap.hists.items()):
            labels = f'probe="{_esc(probes[idx].name)}"'
            if by == "pid":
                labels += f',pid="{pid}"'
            if by == "comm":
                labels += f',comm="{_esc(comm)}"'
            cum = 0
            for b in range(0, max(hist) + 1):
                cum += hist.get(b, 0)
                le = 0 if b == 0 else (1 << b) - 1
                lines.append(f'bpfmux_latency_ns_bucket{{{labels},le="{le}"}} {cum}')
            lines.append(f'bpfmux_latency_ns_bucket{{{labels},le="+Inf"}} {cum}')
            lines.append(f"bpfmux_latency_ns_count{{{labels}}} {cum}")
            if by is None and idx in snap.latsum:
                lines.append(f"bpfmux_latency_ns_sum{{{labels}}} {snap.latsum[idx]}")
    return "\n".join(lines) + "\n"


def rich_table(rows: list[CountRow], by: str | None, *, title: str, caption: str) -> Group:
    """A rich renderable: the count rows with a rate column, and a status line under them."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    t = Table(title=title, expand=False, title_justify="left")
    t.add_column("PROBE", overflow="fold")
    if by == "pid":
        t.add_column("PID", justify="right")
    if by == "comm":
        t.add_column("COMM")
    t.add_column("RATE/s", justify="right")
    t.add_column("COUNT", justify="right", style="bold")
    for r in rows:
        cells = [r.probe] + ([str(r.pid)] if by == "pid" else []) + ([r.comm] if by == "comm" else [])
        t.add_row(*cells, f"{r.rate:,.0f}", f"{r.total:,}")
    return Group(t, Text(caption, style="dim"))

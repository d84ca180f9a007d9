"""Map contents as a person reads them: read, summed per CPU, compared
between intervals, sorted, and written as text (histograms drawn).

:func:`read_map` takes a map's entries (a global-data section's variables
one by one); :func:`since` keeps what changed since an earlier reading
(the counts of one interval); :func:`render` writes the lines: entries
sorted by value when every value is a number (smallest first, the largest
last, as bpftrace prints), else by key; ``slots`` histograms
(:mod:`bpfmux.show.hist`) drawn under their key; zero entries of arrays left
out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..uapi import MapType
from .hist import HistSpec, draw, find_slots
from .values import is_number, sort_key, text, total

__all__ = ["Reading", "is_zero", "read_map", "render", "since", "sum_percpu"]

_PERCPU = (MapType.PERCPU_ARRAY, MapType.PERCPU_HASH, MapType.LRU_PERCPU_HASH)
_ARRAYS = (MapType.ARRAY, MapType.PERCPU_ARRAY)


@dataclass
class Reading:
    """One reading of a map.

    :ivar name: the map's name; :ivar type: its :class:`~bpfmux.uapi.MapType`.
    :ivar entries: ``(key, value)`` pairs (per-CPU values summed; for a
        global-data section, ``(variable name, value)``).
    :ivar section: True for a global-data section.
    """

    name: str
    type: MapType
    entries: list[tuple[Any, Any]] = field(default_factory=list)
    section: bool = False


def sum_percpu(values: list[Any]) -> Any:
    """One value for a per-CPU list: numbers added, records and lists added
    member by member (other members taken from the first CPU)."""
    if not values:
        return 0
    out = values[0]
    for v in values[1:]:
        out = _add(out, v)
    return out


def _add(a: Any, b: Any) -> Any:
    if is_number(a) and is_number(b):
        return a + b
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [_add(x, y) for x, y in zip(a, b, strict=True)]
    if hasattr(a, "keys") and hasattr(b, "keys") and not isinstance(a, bytes | str):
        return {k: _add(a[k], b[k]) if k in b.keys() else a[k] for k in a.keys()}
    return a


def read_map(name: str, m: Any, *, sum_cpus: bool = True) -> Reading:
    """Read map ``m`` (a :class:`bpfmux.api.Map`; a global-data section
    when it has ``variables``); per-CPU values summed unless ``sum_cpus`` is false.

    :raises BpfError: / :raises BpfmuxError: the map cannot be read.
    """
    mtype = MapType(int(m.type))
    variables = getattr(m, "variables", None)
    if variables:
        return Reading(name, mtype, [(v, m[v]) for v in variables], section=True)
    entries = list(m.items())
    if mtype in _PERCPU and sum_cpus:
        entries = [(k, sum_percpu(v) if isinstance(v, list) else v) for k, v in entries]
    return Reading(name, mtype, entries)


def _minus(cur: Any, prev: Any) -> Any:
    if is_number(cur) and is_number(prev):
        return cur - prev
    if isinstance(cur, list) and isinstance(prev, list) and len(cur) == len(prev):
        return [_minus(x, y) for x, y in zip(cur, prev, strict=True)]
    if hasattr(cur, "keys") and hasattr(prev, "keys") and not isinstance(cur, bytes | str):
        return {k: _minus(cur[k], prev[k]) if k in prev.keys() else cur[k] for k in cur.keys()}
    return cur


def is_zero(v: Any) -> bool:
    """True for 0, all-zero arrays and bytes, and records whose numbers are all 0."""
    if is_number(v):
        return not v
    if isinstance(v, bytes | bytearray):
        return not any(v)
    if isinstance(v, list):
        return all(is_zero(x) for x in v)
    if hasattr(v, "keys") and not isinstance(v, str):
        return all(is_zero(v[k]) for k in v.keys())
    return False


def since(cur: Reading, prev: Reading | None) -> Reading:
    """What changed since ``prev``: numbers as differences, entries that did not change left out."""
    before = {_freeze(k): v for k, v in prev.entries} if prev is not None else {}
    out = []
    for k, v in cur.entries:
        p = before.get(_freeze(k))
        d = _minus(v, p) if p is not None else v
        if not is_zero(d):
            out.append((k, d))
    return Reading(cur.name, cur.type, out, cur.section)


def _freeze(k: Any) -> Any:
    if isinstance(k, list):
        return tuple(_freeze(x) for x in k)
    if hasattr(k, "keys") and not isinstance(k, str | bytes):
        return tuple((n, _freeze(k[n])) for n in k.keys())
    return k


def render(reading: Reading, hists: Mapping[str, HistSpec] | None = None, indent: str = "  ") -> list[str]:
    """The lines of one reading (module doc); ``hists`` names the maps or
    variables whose ``slots`` are not log2."""
    hists = hists or {}
    name = reading.name
    if reading.section:
        return _render_section(reading, hists, indent)
    entries = reading.entries
    hidden = 0
    if reading.type in _ARRAYS:
        kept = [(k, v) for k, v in entries if not is_zero(v)]
        hidden = len(entries) - len(kept)
        entries = kept
    totals = [total(v) for _, v in entries]
    if entries and all(t is not None for t in totals):
        entries = sorted(entries, key=lambda kv: (total(kv[1]), sort_key(kv[0])))
    else:
        entries = sorted(entries, key=lambda kv: sort_key(kv[0]))
    lines = [f"{name}:"]
    spec = hists.get(name, HistSpec())
    for k, v in entries:
        lines.extend(_entry(text(k), v, spec, indent))
    if not entries:
        lines.append(f"{indent}(empty)" if not hidden else f"{indent}(all {hidden} entries are 0)")
    elif hidden:
        lines.append(f"{indent}({hidden} entries that are 0 not shown)")
    return lines


def _entry(label: str, v: Any, spec: HistSpec, indent: str) -> list[str]:
    h = find_slots(v)
    if h is not None:
        slots, others = h
        head = f"{indent}{label}" + (f" {text(others)}" if others else "") + ":"
        body = draw(slots, spec, indent + "  ")
        return [head, *body] if body else [f"{head} (no counts)"]
    if isinstance(v, list) and v and all(find_slots(x) is not None for x in v):
        out = []
        for i, x in enumerate(v):
            if not is_zero(x):
                out.extend(_entry(f"{label}[{i}]", x, spec, indent))
        return out or [f"{indent}{label}: (no counts)"]
    return [f"{indent}{label}: {text(v)}"]


def _render_section(reading: Reading, hists: Mapping[str, HistSpec], indent: str) -> list[str]:
    lines = [f"{reading.name}:"]
    for var, v in reading.entries:
        lines.extend(_entry(str(var), v, hists.get(var, hists.get(reading.name, HistSpec())), indent))
    if not reading.entries:
        lines.append(f"{indent}(no variables)")
    return lines

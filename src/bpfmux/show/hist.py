"""Histograms kept in ``slots`` arrays, drawn as bpftrace draws its own.

Tools count into ``struct hist { __u32 slots[MAX_SLOTS]; }`` (a map value, a
member of one, or a global): slot ``i`` of a *log2* histogram counts values
``v`` with ``log2(v) == i`` (slot 0 holds 0 and 1), slot ``i`` of a *linear*
histogram values in ``[base + i*step, base + (i+1)*step)``. :func:`find_slots`
says whether a decoded value holds one; :func:`draw` returns the lines::

    [2, 4)                 5 |@@@@                                                |
    [4, 8)                52 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|

Only the slots from the first to the last non-zero one are drawn.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidArgumentError

__all__ = ["BAR_WIDTH", "HistSpec", "draw", "find_slots", "parse_hist_spec"]

#: width of the bar between the ``|``
BAR_WIDTH = 52
#: the member name a histogram's counts are kept in
SLOTS = "slots"


@dataclass(frozen=True, slots=True)
class HistSpec:
    """How to read a ``slots`` array: ``log2`` or ``linear`` with ``step`` and ``base``."""

    mode: str = "log2"
    step: int = 1
    base: int = 0


def parse_hist_spec(text: str) -> HistSpec:
    """``log2``, ``linear``, ``linear:STEP`` or ``linear:STEP:BASE``.

    :raises InvalidArgumentError: anything else.
    """
    parts = text.split(":")
    if parts[0] == "log2" and len(parts) == 1:
        return HistSpec()
    if parts[0] == "linear" and len(parts) <= 3:
        try:
            step = int(parts[1], 0) if len(parts) > 1 else 1
            base = int(parts[2], 0) if len(parts) > 2 else 0
        except ValueError:
            raise InvalidArgumentError(f"{text!r}: the step and base of a linear histogram are integers") from None
        if step < 1:
            raise InvalidArgumentError(f"{text!r}: a linear histogram's step is at least 1")
        return HistSpec("linear", step, base)
    raise InvalidArgumentError(f"{text!r} is not a histogram kind; use log2, linear, linear:STEP or linear:STEP:BASE")


def find_slots(v: Any) -> tuple[list[int], dict[str, Any]] | None:
    """``(slots, other fields)`` when ``v`` is a record with an integer array
    member named ``slots`` (or is such an array inside a record); else ``None``."""
    if not (hasattr(v, "keys") and hasattr(v, "__getitem__")) or isinstance(v, list | bytes | str):
        return None
    try:
        keys = list(v.keys())
    except TypeError:
        return None
    if SLOTS not in keys:
        return None
    slots = v[SLOTS]
    if not isinstance(slots, list) or len(slots) < 2 or not all(isinstance(x, int) for x in slots):
        return None
    return [int(x) for x in slots], {k: v[k] for k in keys if k != SLOTS}


def _human(n: int) -> str:
    for suffix, shift in (("P", 50), ("T", 40), ("G", 30), ("M", 20), ("K", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift}{suffix}"
    return str(n)


def _label(i: int, spec: HistSpec) -> str:
    if spec.mode == "linear":
        lo = spec.base + i * spec.step
        return f"[{lo}, {lo + spec.step})"
    if i == 0:
        return "[0, 2)"
    return f"[{_human(1 << i)}, {_human(1 << (i + 1))})"


def draw(slots: Sequence[int], spec: HistSpec = HistSpec(), indent: str = "") -> list[str]:
    """The histogram's lines (no lines when every slot is 0)."""
    nz = [i for i, c in enumerate(slots) if c]
    if not nz:
        return []
    top = max(slots)
    lines = []
    for i in range(nz[0], nz[-1] + 1):
        c = slots[i]
        bar = "@" * (c * BAR_WIDTH // top) if top else ""
        lines.append(f"{indent}{_label(i, spec):<16} {c:>8} |{bar:<{BAR_WIDTH}}|")
    return lines

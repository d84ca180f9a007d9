"""The helper table: helper id → Python implementation.

A helper is a callable ``fn(rs, r1, r2, r3, r4, r5) -> int``: it gets the
:class:`~bpfmux.emu.vm.runtime.RunState` of the run (memory, task, clock, the
:class:`~bpfmux.emu.vm.runtime.RunContext`) and the five argument registers as
u64, and returns ``r0`` (negative numbers are fine; they are truncated to
u64). It reads and writes program memory only through ``rs.read`` /
``rs.write`` (which fault like a program access would) and calls back into
the program through ``rs.call_function``.

The one exception is ``bpf_tail_call`` (id 12), which returns the program to
continue in, or ``None`` when the tail call fails; the tiers handle it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from ....errors import BpfmuxError

Helper = Callable[..., Any]

#: Helpers registered by the modules of this package (filled at import).
DEFAULT: dict[int, tuple[str, Helper]] = {}


def helper(hid: int, name: str) -> Callable[[Helper], Helper]:
    """Decorator: register ``fn`` as a default helper."""

    def deco(fn: Helper) -> Helper:
        DEFAULT[hid] = (name, fn)
        return fn

    return deco


class HelperTable:
    """The helpers one VM offers programs.

    :ivar table: id → callable (what the tiers call).
    :ivar names: id → name.
    :ivar version: incremented on every change (compiled fast-tier code is
        rebuilt when the table changed since it was compiled).
    """

    def __init__(self, defaults: bool = True) -> None:
        self.table: dict[int, Helper] = {}
        self.names: dict[int, str] = {}
        self.version = 0
        if defaults:
            _load_defaults()
            for hid, (name, fn) in DEFAULT.items():
                self.table[hid] = fn
                self.names[hid] = name

    def register(self, hid: int, fn: Helper, name: str | None = None) -> None:
        """Add or replace helper ``hid``.

        :raises BpfmuxError: ``hid`` is not a non-negative int or ``fn`` is
            not callable.
        """
        if not isinstance(hid, int) or hid < 0 or not callable(fn):
            raise BpfmuxError("register a helper as register(id: int >= 0, fn: callable)")
        self.table[hid] = fn
        self.names[hid] = name or str(getattr(fn, "__name__", f"helper_{hid}"))
        self.version += 1

    def unregister(self, hid: int) -> None:
        """Remove helper ``hid`` (a later call to it faults)."""
        self.table.pop(hid, None)
        self.names.pop(hid, None)
        self.version += 1

    def __contains__(self, hid: object) -> bool:
        return hid in self.table

    def __getitem__(self, hid: int) -> Helper:
        return self.table[hid]

    def __iter__(self) -> Iterator[int]:
        return iter(sorted(self.table))

    def __len__(self) -> int:
        return len(self.table)

    def name(self, hid: int) -> str:
        """The helper's name (``helper_<id>`` when unknown)."""
        return self.names.get(hid, f"helper_{hid}")


def _load_defaults() -> None:
    from . import control, maps, output, probe, task, tracing  # noqa: F401 - registers helpers

"""The emulated kernel's memory budget.

Everything the emulated kernel allocates on behalf of a user or a program
is charged here *before* it is allocated: map storage (at creation, as the
kernel preallocates it; per element for ``BPF_F_NO_PREALLOC`` hash maps),
ring buffers, program stack frames, kernel memory an :class:`Emulator`
hands out. What does not fit fails with the errno the kernel gives when its
own allocation fails, ``ENOMEM`` (a :class:`~bpfmux.errors.BpfError`), with a
message that says how large the budget is and how to raise it — never with
Python's ``MemoryError`` halfway through building an object.

The charges are estimates of what the emulator really holds (buffers plus
Python's per-object overhead), not the kernel's exact accounting.
"""

from __future__ import annotations

import errno

from ...errors import BpfError, InvalidArgumentError

__all__ = ["DEFAULT_MEMORY_BUDGET", "MemoryBudget", "format_size"]

#: Bytes the emulated kernel may hold unless told otherwise: 1 GiB.
DEFAULT_MEMORY_BUDGET = 1 << 30

#: How to raise the budget, for messages.
_HOW = "raise it with VM(memory_budget=...), Emulator(memory_budget=...) or bpfmux emulate --memory-budget SIZE"


def format_size(n: int) -> str:
    """``n`` bytes for people: ``512 B``, ``4.0 KiB``, ``1.5 GiB``."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{n} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"  # pragma: no cover - the loop always returns


class MemoryBudget:
    """Bytes in use against a limit.

    :param limit: the budget in bytes.
    :raises InvalidArgumentError: a limit below 1.

    :ivar limit: the budget; :ivar used: bytes charged and not released.
    """

    def __init__(self, limit: int = DEFAULT_MEMORY_BUDGET) -> None:
        if limit < 1:
            raise InvalidArgumentError(f"memory budget must be at least 1 byte, not {limit}")
        self.limit = limit
        self.used = 0

    def fits(self, nbytes: int) -> bool:
        """Whether ``nbytes`` more fit."""
        return self.used + nbytes <= self.limit

    def charge(self, nbytes: int, what: str) -> int:
        """Take ``nbytes`` for ``what`` (e.g. ``"ARRAY map 'big'"``); returns ``nbytes``.

        :raises BpfError: ``ENOMEM`` when they do not fit.
        """
        if nbytes < 0:
            raise InvalidArgumentError(f"{what}: cannot charge {nbytes} bytes")
        if self.used + nbytes > self.limit:
            raise BpfError(errno.ENOMEM, f"{what} needs {format_size(nbytes)} of emulated kernel memory, and "
                           f"{format_size(self.used)} of its {format_size(self.limit)} budget is in use; {_HOW}")
        self.used += nbytes
        return nbytes

    def release(self, nbytes: int) -> None:
        """Give back ``nbytes`` charged earlier."""
        self.used = max(0, self.used - nbytes)

    def __repr__(self) -> str:
        return f"<MemoryBudget {format_size(self.used)} of {format_size(self.limit)}>"

"""CPU lists of this machine (``/sys/devices/system/cpu/{online,possible}``)."""

from __future__ import annotations

import functools
import os

from ..errors import ParseError

__all__ = ["online_cpus", "parse_cpu_list", "possible_cpus"]

#: the largest CPU number a list may name (the kernel's NR_CPUS is at most 8192)
MAX_CPU = 1 << 16


def parse_cpu_list(text: str) -> list[int]:
    """``"0-3,6"`` → ``[0, 1, 2, 3, 6]``.

    :raises ParseError: malformed list.
    """
    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        a, sep, b = part.partition("-")
        if not a.isdigit() or (sep and not b.isdigit()):
            raise ParseError(f"bad CPU list {text!r}")
        lo, hi = int(a), int(b) if sep else int(a)
        if hi < lo or hi > MAX_CPU:
            raise ParseError(f"bad CPU range {part!r}")
        out.extend(range(lo, hi + 1))
    return out


def _read_list(path: str) -> list[int] | None:
    try:
        with open(path, encoding="ascii") as f:
            text = f.read(4096).strip()
    except OSError:
        return None
    return parse_cpu_list(text)


def online_cpus() -> list[int]:
    """CPUs that are online (``/sys/devices/system/cpu/online``, e.g. ``0-3,6``);
    ``range(os.cpu_count())`` when the file cannot be read.

    :raises ParseError: the list is malformed.
    """
    cpus = _read_list("/sys/devices/system/cpu/online")
    return cpus if cpus is not None else list(range(os.cpu_count() or 1))


@functools.cache
def possible_cpus() -> int:
    """Number of possible CPUs (``/sys/devices/system/cpu/possible``): the
    number of values a per-CPU map holds per key.

    :raises ParseError: the file cannot be read or its list is malformed.
    """
    cpus = _read_list("/sys/devices/system/cpu/possible")
    if not cpus:
        raise ParseError("cannot read the possible CPUs", source="/sys/devices/system/cpu/possible")
    return max(cpus) + 1

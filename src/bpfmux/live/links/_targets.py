"""Parsing attach targets written as text.

- uprobe: ``BINARY:SYMBOL``, ``BINARY:SYMBOL+OFFSET``, ``BINARY:0xFILEOFFSET``
  (``BINARY`` a path or a library name such as ``libc.so.6``; ``SYMBOL`` may
  carry a version, ``getpid@@GLIBC_2.2.5``, or be a glob for multi attach);
- kprobe: ``FUNCTION``, ``FUNCTION+OFFSET``, ``0xADDRESS``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import ParseError

__all__ = ["KprobeTarget", "UprobeTarget", "parse_kprobe_target", "parse_uprobe_target"]


@dataclass(frozen=True, slots=True)
class UprobeTarget:
    """A parsed uprobe target.

    :ivar binary: path or library name, as written.
    :ivar symbol: function name or glob (``None`` when an offset is given).
    :ivar offset: extra offset after the symbol, or the file offset itself.
    """

    binary: str
    symbol: str | None
    offset: int = 0


@dataclass(frozen=True, slots=True)
class KprobeTarget:
    """A parsed kprobe target: ``function+offset`` or an absolute ``address``."""

    function: str | None
    offset: int = 0
    address: int = 0


def _int(text: str, what: str, spec: str) -> int:
    try:
        v = int(text, 0)
    except ValueError:
        raise ParseError(f"bad {what} {text!r} in {spec!r}") from None
    if v < 0:
        raise ParseError(f"negative {what} in {spec!r}")
    return v


def parse_uprobe_target(spec: str) -> UprobeTarget:
    """``"libc.so.6:getpid"`` → ``UprobeTarget("libc.so.6", "getpid", 0)``.

    :raises ParseError: no ``:``, empty parts, bad offset.
    """
    binary, sep, rest = spec.rpartition(":")
    if not sep or not binary or not rest:
        raise ParseError(f"uprobe target {spec!r} must be 'BINARY:SYMBOL[+OFFSET]' or 'BINARY:0xOFFSET'")
    if rest[0].isdigit():
        return UprobeTarget(binary, None, _int(rest, "file offset", spec))
    sym, plus, off = rest.partition("+")
    if not sym:
        raise ParseError(f"empty symbol in uprobe target {spec!r}")
    return UprobeTarget(binary, sym, _int(off, "offset", spec) if plus else 0)


def parse_kprobe_target(spec: str) -> KprobeTarget:
    """``"do_sys_openat2+0x10"`` → ``KprobeTarget("do_sys_openat2", 16)``.

    :raises ParseError: empty or malformed.
    """
    if not spec:
        raise ParseError("empty kprobe target; give a kernel function name")
    if spec[0].isdigit():
        return KprobeTarget(None, 0, _int(spec, "address", spec))
    fn, plus, off = spec.partition("+")
    if not fn or any(c.isspace() for c in fn):
        raise ParseError(f"bad kprobe target {spec!r}")
    return KprobeTarget(fn, _int(off, "offset", spec) if plus else 0)

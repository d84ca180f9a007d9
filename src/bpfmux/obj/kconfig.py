"""The ``.kconfig`` map value: kernel config values encoded as the externs' types.

libbpf's rules: ``bool`` takes ``y``/``m`` → 1, ``n`` → 0; an
``enum libbpf_tristate`` takes ``y`` → 1, ``m`` → 2, ``n`` → 0; ``char``
takes the first character of ``y``/``m``/``n``; integers take decimal or hex
text; ``char[]`` takes a quoted string (truncated to fit, NUL-terminated).
A missing weak extern reads as 0; a missing strong extern is an error.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping

from ..errors import NotFoundError, ParseError
from .spec import Extern

__all__ = ["encode", "parse_config"]


def parse_config(text: str) -> dict[str, str]:
    """Parse a kernel ``.config`` (``CONFIG_X=y``; ``# CONFIG_Y is not set`` → ``n``)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("# CONFIG_") and line.endswith(" is not set"):
            out[line[2:-len(" is not set")]] = "n"
        elif line.startswith("CONFIG_") and "=" in line:
            k, v = line.split("=", 1)
            out[k] = v
    return out


def encode(externs: Iterable[Extern], values: Mapping[str, object]) -> bytes:
    """The ``.kconfig`` map value for ``externs`` (with offsets laid out).

    :raises NotFoundError: a strong extern has no value.
    :raises ParseError: a value does not fit its extern's type.
    """
    exts = list(externs)
    size = max((e.offset + e.size for e in exts), default=0)
    buf = bytearray(size)
    for e in exts:
        if e.name not in values:
            if e.weak:
                continue
            raise NotFoundError("kconfig value", e.name,
                                "the kernel config does not set it; declare the extern __weak to make it optional")
        buf[e.offset:e.offset + e.size] = _value(e, values[e.name])
    return bytes(buf)


def _value(e: Extern, v: object) -> bytes:
    t = e.kcfg_type
    if isinstance(v, bool):
        v = "y" if v else "n"
    if t in ("bool", "tristate"):
        s = str(v)
        table = {"y": 1, "n": 0, "m": 1 if t == "bool" else 2}
        if s not in table:
            raise ParseError(f"kconfig {e.name}: {s!r} is not y, m or n")
        return table[s].to_bytes(e.size, "little")
    if t == "char":
        s = str(v)
        if s not in ("y", "m", "n"):
            raise ParseError(f"kconfig {e.name}: {s!r} is not y, m or n (char extern)")
        return s.encode()[:1]
    if t == "char_array":
        s = str(v)
        if len(s) >= 2 and s[0] == s[-1] == '"':
            s = s[1:-1]
        raw = s.encode()[: e.size - 1]
        return raw + b"\0" * (e.size - len(raw))
    if isinstance(v, int):
        n = v
    else:
        try:
            n = int(str(v), 0)
        except ValueError:
            raise ParseError(f"kconfig {e.name}: {v!r} is not an integer") from None
    lo, hi = (-(1 << (8 * e.size - 1)), 1 << (8 * e.size - 1)) if e.signed else (0, 1 << (8 * e.size))
    if not lo <= n < hi:
        raise ParseError(f"kconfig {e.name}: {n} does not fit {e.size} bytes")
    fmt = {1: "b", 2: "h", 4: "i", 8: "q"}[e.size]
    return struct.pack("<" + (fmt if e.signed else fmt.upper()), n)

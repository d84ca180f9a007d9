"""Decoded values as a person reads them: plain data, one-line text, sort keys.

Values come from the BTF codecs (:mod:`bpfmux.btf.codec`): ints, bools,
:class:`~bpfmux.btf.codec.EnumInt`, ``bytes`` for char arrays, lists,
:class:`~bpfmux.btf.codec.Record` for structs. :func:`plain` makes them
JSON-able (char arrays holding text become strings, several NUL-separated
strings — an argv — a list of them); :func:`text` writes
one line, with long mostly-zero arrays shown by their non-zero elements and
long byte strings cut; :func:`sort_key` orders keys and values of any of
these kinds.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["is_number", "plain", "sort_key", "text", "total"]

#: arrays longer than this show only their non-zero elements (``{index: value}``)
SPARSE_FROM = 16
#: byte strings longer than this are cut in text
MAX_HEX_BYTES = 64


def plain(v: Any) -> Any:
    """JSON-able data: records as dicts, enums as their names when they have one,
    text in char arrays as ``str``, other bytes as hex."""
    if hasattr(v, "as_dict") and hasattr(v, "keys"):
        return {k: plain(v[k]) for k in v.keys()}
    if isinstance(v, dict):
        return {str(k): plain(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [plain(x) for x in v]
    if isinstance(v, bytes | bytearray):
        s = _as_text(bytes(v))
        if s is not None:
            return s
        parts = _as_strings(bytes(v))
        return parts if parts is not None else bytes(v).hex()
    name = getattr(v, "name", None)
    if isinstance(v, int) and isinstance(name, str) and not isinstance(v, bool):
        return name  # an EnumInt
    return v


def _as_text(b: bytes) -> str | None:
    """The C string in ``b`` when ``b`` is one: printable text up to a NUL,
    zeros after (or anything after, when the text is not empty and what
    follows is not more strings: a reused buffer's leftovers)."""
    s = b.split(b"\0", 1)[0]
    try:
        t = s.decode()
    except UnicodeDecodeError:
        return None
    if not t.isprintable():
        return None
    if not any(b[len(s):]):
        return t
    return t if t and _as_strings(b) is None else None


def _as_strings(b: bytes) -> list[str] | None:
    """The C strings packed one after another in ``b`` (``"a\0b\0"`` and zeros after: an argv), or ``None``."""
    body = b.rstrip(b"\0")
    if not body:
        return None
    try:
        parts = body.decode().split("\0")
    except UnicodeDecodeError:
        return None
    return parts if all(p.isprintable() for p in parts) else None


def text(v: Any) -> str:
    """One line for a decoded value."""
    if hasattr(v, "as_dict") and hasattr(v, "keys"):
        return "{" + ", ".join(f"{k}: {text(v[k])}" for k in v.keys()) + "}"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {text(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list | tuple):
        if len(v) > SPARSE_FROM and all(is_number(x) for x in v):
            nz = {i: x for i, x in enumerate(v) if x}
            if len(nz) <= len(v) // 2:
                inner = ", ".join(f"{i}: {x}" for i, x in nz.items())
                return f"[{len(v)} × 0" + (f"; except {inner}" if nz else "") + "]"
        return "[" + ", ".join(text(x) for x in v) + "]"
    if isinstance(v, bytes | bytearray):
        b = bytes(v)
        s = _as_text(b)
        if s is not None:
            return json.dumps(s)
        parts = _as_strings(b)
        if parts is not None:
            return "[" + ", ".join(json.dumps(p) for p in parts) + "]"
        if not any(b):
            return f"<{len(b)} zero bytes>"
        if len(b) > MAX_HEX_BYTES:
            return f"<{len(b)} bytes: {b[:MAX_HEX_BYTES].hex()}…>"
        return b.hex()
    name = getattr(v, "name", None)
    if isinstance(v, int) and isinstance(name, str) and not isinstance(v, bool):
        return name
    return str(v)


def is_number(v: Any) -> bool:
    """True for ints and floats (bools excluded)."""
    return isinstance(v, int | float) and not isinstance(v, bool)


def total(v: Any) -> int | float | None:
    """The number a value stands for when sorting or summing: itself for a
    number, the sum for a per-CPU list of numbers, else ``None``."""
    if is_number(v):
        return v
    if isinstance(v, list) and v and all(is_number(x) for x in v):
        return sum(v)
    return None


def sort_key(v: Any) -> tuple[Any, ...]:
    """A key that orders values of mixed kinds: numbers, then text, then the rest by their text."""
    if is_number(v):
        return (0, v, "")
    p = plain(v)
    if isinstance(p, str):
        return (1, 0, p)
    if isinstance(p, dict):
        return (2, 0, tuple(sort_key(x) for x in p.values()))
    if isinstance(p, list):
        return (2, 0, tuple(sort_key(x) for x in p))
    return (3, 0, str(p))

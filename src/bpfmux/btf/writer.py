"""Serializing a :class:`~bpfmux.btf.model.Btf` back to the raw format ``BPF_BTF_LOAD`` takes.

The string section of a parsed BTF is kept as the prefix of the new one (new
names are appended), so an unmodified BTF writes back byte for byte.
"""

from __future__ import annotations

import struct
import sys
from array import array
from itertools import accumulate
from typing import TYPE_CHECKING

from ..errors import ParseError
from ..uapi import BtfKind
from .types import (
    Array,
    Composite,
    Const,
    Datasec,
    DeclTag,
    Enum,
    Float,
    Func,
    FuncProto,
    Fwd,
    Int,
    Ptr,
    Restrict,
    Type,
    Typedef,
    TypeTag,
    Var,
    Volatile,
)

if TYPE_CHECKING:
    from .model import Btf

__all__ = ["StringTable", "write"]

_HDR = {"little": struct.Struct("<HBBIIIII"), "big": struct.Struct(">HBBIIIII")}


class StringTable:
    """A BTF string section under construction (deduplicated).

    :param prefix: an existing string section to keep as is (must start with NUL).
    :param start: offset of this table's first byte (a split BTF's strings
        continue its base's).
    :param base: a table whose strings may be referred to instead of adding them.
    """

    def __init__(self, prefix: bytes = b"\0", start: int = 0, base: StringTable | None = None) -> None:
        self.start = start
        self.base = base
        self._buf = bytearray(prefix)
        self._map: dict[bytes, int] | None = None

    def _index(self) -> dict[bytes, int]:
        if self._map is None:
            parts = bytes(self._buf).split(b"\0")
            if parts and parts[-1] == b"":
                parts.pop()
            offs = accumulate((len(p) + 1 for p in parts), initial=self.start)
            # reversed so that the first occurrence of a duplicated string wins
            self._map = dict(zip(reversed(parts), reversed(list(offs)[: len(parts)]), strict=True))
        return self._map

    def lookup(self, s: bytes) -> int | None:
        """The offset of ``s`` if present (in the base or here), else ``None``."""
        if self.base is not None:
            hit = self.base.lookup(s)
            if hit is not None:
                return hit
        return self._index().get(s)

    def add(self, name: str) -> int:
        """The offset of ``name``, appending it when new. ``""`` is offset 0."""
        if not name:
            return 0
        s = name.encode("utf-8", "surrogateescape")
        hit = self.lookup(s)
        if hit is not None:
            return hit
        idx = self._index()
        off = self.start + len(self._buf)
        self._buf += s + b"\0"
        idx[s] = off
        return off

    def data(self) -> bytes:
        """The section bytes."""
        return bytes(self._buf)


def _u32(v: int, what: str, t: Type) -> int:
    if not 0 <= v <= 0xFFFFFFFF:
        raise ParseError(f"cannot encode {what}={v} of {t!r}: it does not fit 32 bits")
    return v


def _vlen(n: int, t: Type) -> int:
    if n > 0xFFFF:
        raise ParseError(f"cannot encode {t!r}: {n} entries exceed the 65535 BTF allows")
    return n


def _info(kind: BtfKind, vlen: int = 0, kflag: int = 0) -> int:
    return (int(kflag) & 1) << 31 | int(kind) << 24 | vlen


def encode_type(t: Type, add: StringTable, out: array) -> None:
    """Append the words of ``t``'s record to ``out``, adding its strings to ``add``.

    :raises ParseError: a field is out of range for the format.
    """
    name = add.add(t.name)
    k = t.kind
    u = _u32
    if isinstance(t, Int):
        if t.bits > 128 or t.bits_offset > 255 or int(t.encoding) > 15:
            raise ParseError(f"cannot encode {t!r}: bits/offset/encoding out of range")
        out.extend((name, _info(k), u(t.size, "size", t), int(t.encoding) << 24 | t.bits_offset << 16 | t.bits))
    elif isinstance(t, Array):
        out.extend((0, _info(k), 0, u(t.type_id, "type", t), u(t.index_type_id, "index type", t), u(t.nelems, "nelems", t)))
    elif isinstance(t, Composite):
        out.extend((name, _info(k, _vlen(len(t.members), t), t.kind_flag), u(t.size, "size", t)))
        for m in t.members:
            if t.kind_flag:
                if m.bitfield_size > 255 or m.bit_offset > 0xFFFFFF:
                    raise ParseError(f"cannot encode member {m.name!r} of {t!r}: bitfield size/offset out of range")
                off = m.bitfield_size << 24 | m.bit_offset
            else:
                if m.bitfield_size:
                    raise ParseError(f"member {m.name!r} of {t!r} is a bitfield but kind_flag is 0; set kind_flag=1")
                off = u(m.bit_offset, "bit_offset", t)
            out.extend((add.add(m.name), u(m.type_id, "member type", t), off))
    elif isinstance(t, Enum):
        is64 = k == BtfKind.ENUM64
        out.extend((name, _info(k, _vlen(len(t.values), t), int(t.signed)), u(t.size, "size", t)))
        for v in t.values:
            val = v.value
            lim = 64 if is64 else 32
            if not -(1 << (lim - 1)) <= val < (1 << lim):
                raise ParseError(f"cannot encode enumerator {v.name}={val} of {t!r}: it does not fit {lim} bits")
            val &= (1 << lim) - 1
            if is64:
                out.extend((add.add(v.name), val & 0xFFFFFFFF, val >> 32))
            else:
                out.extend((add.add(v.name), val))
    elif isinstance(t, Fwd):
        out.extend((name, _info(k, 0, t.kind_flag), 0))
    elif isinstance(t, Func):
        out.extend((name, _info(k, int(t.linkage)), u(t.type_id, "type", t)))
    elif isinstance(t, FuncProto):
        out.extend((0, _info(k, _vlen(len(t.params), t)), u(t.return_type_id, "return type", t)))
        for p in t.params:
            out.extend((add.add(p.name), u(p.type_id, "param type", t)))
    elif isinstance(t, Var):
        out.extend((name, _info(k), u(t.type_id, "type", t), u(int(t.linkage), "linkage", t)))
    elif isinstance(t, Datasec):
        out.extend((name, _info(k, _vlen(len(t.vars), t)), u(t.size, "size", t)))
        for vs in t.vars:
            out.extend((u(vs.type_id, "var type", t), u(vs.offset, "var offset", t), u(vs.size, "var size", t)))
    elif isinstance(t, Float):
        out.extend((name, _info(k), u(t.size, "size", t)))
    elif isinstance(t, DeclTag):
        out.extend((name, _info(k, 0, t.kind_flag), u(t.type_id, "type", t), t.component_idx & 0xFFFFFFFF))
    elif isinstance(t, TypeTag):
        out.extend((name, _info(k, 0, t.kind_flag), u(t.type_id, "type", t)))
    elif isinstance(t, Ptr | Typedef | Volatile | Const | Restrict):
        out.extend((name, _info(k), u(t.type_id, "type", t)))
    else:
        raise ParseError(f"cannot encode {t!r}: kind {k.name} has no record")


def _base_table(btf: Btf) -> StringTable:
    base = _base_table(btf.base) if btf.base is not None else None
    return StringTable(btf.strings or (b"\0" if btf.base is None else b""), btf.str_start, base)


def write(btf: Btf, byteorder: str = "little") -> bytes:
    """Serialize ``btf``'s own types (a split BTF's without its base) to a raw blob.

    :param byteorder: ``"little"`` (what the kernel of this machine loads) or ``"big"``.
    :raises ParseError: a type has a field out of range for the format, or
        ``byteorder`` is neither ``"little"`` nor ``"big"`` (a ``ValueError``).
    """
    if byteorder not in _HDR:
        raise ParseError(f"byteorder must be 'little' or 'big', not {byteorder!r}")
    base = _base_table(btf.base) if btf.base is not None else None
    prefix = btf.strings if btf.strings else (b"\0" if btf.base is None else b"")
    strs = StringTable(prefix, btf.str_start, base)
    words = array("I")
    for t in btf.own_types():
        encode_type(t, strs, words)
    if (byteorder == "little") != (sys.byteorder == "little"):
        words.byteswap()
    types = words.tobytes()
    sdata = strs.data()
    hdr = _HDR[byteorder].pack(0xEB9F, 1, 0, 24, 0, len(types), len(types), len(sdata))
    return hdr + types + sdata

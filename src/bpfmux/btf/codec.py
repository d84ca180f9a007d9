"""Bytes ⇄ Python values through a BTF type (map keys/values, ring-buffer records, globals).

=====================  =============================================
BTF type               Python value
=====================  =============================================
int                    ``int`` (signed per the encoding), ``bool`` for ``_Bool``
char array             ``bytes`` (the whole array)
other arrays           ``list``
struct / union         :class:`Record` (attribute and item access, ``as_dict()``);
                       anonymous members' fields appear directly, as in C
enum                   :class:`EnumInt` (an ``int`` with ``.name``)
pointer                ``int``
float                  ``float``
=====================  =============================================

:func:`codec` compiles a :class:`Codec` once per type; a struct made only of
fixed-size scalars is decoded with one precompiled :class:`struct.Struct`.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..errors import ParseError
from ..uapi import BtfIntEncoding, BtfKind
from .layout import TypeKindError, resolve, sizeof
from .types import Array, Composite, Enum, Float, Int, Type

if TYPE_CHECKING:
    from .model import Btf

__all__ = ["Codec", "EnumInt", "Record", "codec", "decode", "encode"]

_INT_FMT = {(1, False): "B", (1, True): "b", (2, False): "H", (2, True): "h", (4, False): "I", (4, True): "i", (8, False): "Q", (8, True): "q"}


class EnumInt(int):
    """An enum value: an ``int`` that also knows its enumerator ``name`` (``None`` if it has none)."""

    name: str | None

    def __new__(cls, value: int, name: str | None) -> EnumInt:
        obj = super().__new__(cls, value)
        obj.name = name
        return obj

    def __repr__(self) -> str:
        return f"{self.name}({int(self)})" if self.name else str(int(self))


class Record:
    """A decoded struct/union: fields by attribute or key, ``as_dict()`` for plain data."""

    __slots__ = ("_fields", "_type")

    def __init__(self, type_name: str, fields: dict[str, Any]) -> None:
        object.__setattr__(self, "_type", type_name)
        object.__setattr__(self, "_fields", fields)

    def __getattr__(self, name: str) -> Any:
        try:
            return self._fields[name]
        except KeyError:
            raise AttributeError(f"{self._type} has no field {name!r}; it has {', '.join(self._fields)}") from None

    def __setattr__(self, name: str, value: Any) -> None:
        if name not in self._fields:
            raise AttributeError(f"{self._type} has no field {name!r}")
        self._fields[name] = value

    def __getitem__(self, name: str) -> Any:
        return self._fields[name]

    def __setitem__(self, name: str, value: Any) -> None:
        self.__setattr__(name, value)

    def __iter__(self):
        return iter(self._fields)

    def __len__(self) -> int:
        return len(self._fields)

    def keys(self):
        """Field names."""
        return self._fields.keys()

    def as_dict(self) -> dict[str, Any]:
        """Plain nested dicts/lists/ints (records inside converted too)."""
        return {k: _plain(v) for k, v in self._fields.items()}

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Record):
            return self._fields == other._fields
        if isinstance(other, Mapping):
            return self.as_dict() == dict(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # unhashable on purpose: mutable and equal by value

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self._fields.items())
        return f"{self._type}({inner})"


def _plain(v: Any) -> Any:
    if isinstance(v, Record):
        return v.as_dict()
    if isinstance(v, list):
        return [_plain(x) for x in v]
    if isinstance(v, EnumInt):
        return int(v)
    return v


Decoder = Callable[[bytes | memoryview, int], Any]
Encoder = Callable[[bytearray, int, Any], None]


class Codec:
    """Decoder/encoder for one BTF type.

    :ivar size: byte size of the type.
    """

    def __init__(self, btf: Btf, t: Type) -> None:
        self.btf = btf
        self.type = t
        self.size = sizeof(btf, t)
        self._dec, self._enc = _compile(btf, t)

    def decode(self, data: bytes | bytearray | memoryview, offset: int = 0) -> Any:
        """The value stored at ``offset`` of ``data``.

        :raises ParseError: ``data`` is too short.
        """
        if len(data) - offset < self.size or offset < 0:
            raise ParseError(f"{self.size} bytes needed to decode {self.type.name or self.type.kind.name.lower()}, got {len(data) - offset}")
        return self._dec(data if isinstance(data, bytes) else bytes(data), offset)

    def encode(self, value: Any) -> bytes:
        """The bytes of ``value`` (missing struct fields are zero).

        :raises ParseError: a value does not fit its field, or a struct has no
            such field (a ``ValueError``).
        """
        buf = bytearray(self.size)
        try:
            self._enc(buf, 0, value)
        except (struct.error, OverflowError) as err:  # packed arrays, wide ints, floats
            what = self.type.name or self.type.kind.name.lower()
            raise ParseError(f"a value does not fit {what}: {err}; give values in range of their fields") from None
        return bytes(buf)


def _int_codec(size: int, signed: bool, is_bool: bool, off: int = 0) -> tuple[Decoder, Encoder]:
    fmt = _INT_FMT.get((size, signed))
    if fmt is not None:
        s = struct.Struct("<" + fmt)
        unpack, pack = s.unpack_from, s.pack_into

        def dec(d: bytes | memoryview, o: int) -> Any:
            v = unpack(d, o + off)[0]
            return bool(v) if is_bool else v

        def enc(b: bytearray, o: int, v: Any) -> None:
            try:
                pack(b, o + off, int(v))
            except struct.error as err:
                raise ParseError(f"{v!r} does not fit a {size}-byte {'signed' if signed else 'unsigned'} integer: {err}") from None

        return dec, enc

    def dec2(d: bytes | memoryview, o: int) -> Any:
        return int.from_bytes(d[o + off : o + off + size], "little", signed=signed)

    def enc2(b: bytearray, o: int, v: Any) -> None:
        b[o + off : o + off + size] = int(v).to_bytes(size, "little", signed=signed)

    return dec2, enc2


def _compile(btf: Btf, t: Type) -> tuple[Decoder, Encoder]:
    r = resolve(btf, t)
    if isinstance(r, Int):
        if r.bits != r.size * 8 or r.bits_offset:
            return _bits_codec(r.size, r.bits_offset, r.bits, r.signed, r.is_bool, 0)
        return _int_codec(r.size, r.signed, r.is_bool)
    if isinstance(r, Enum):
        dec, enc = _int_codec(r.size, r.signed, False)
        names = {v.value & ((1 << (8 * r.size)) - 1): v.name for v in reversed(r.values)}
        mask = (1 << (8 * r.size)) - 1

        def edec(d: bytes | memoryview, o: int) -> Any:
            v = dec(d, o)
            return EnumInt(v, names.get(v & mask))

        def eenc(b: bytearray, o: int, v: Any) -> None:
            if isinstance(v, str):
                v = r.value_of(v)
            enc(b, o, v)

        return edec, eenc
    if r.kind == BtfKind.PTR:
        return _int_codec(8, False, False)
    if isinstance(r, Float):
        fmt = {4: "<f", 8: "<d", 2: "<e"}.get(r.size)
        if fmt is None:
            raise TypeKindError(f"cannot decode a {r.size}-byte float")
        s = struct.Struct(fmt)
        return (lambda d, o: s.unpack_from(d, o)[0]), (lambda b, o, v: s.pack_into(b, o, float(v)))
    if isinstance(r, Array):
        return _array_codec(btf, r)
    if isinstance(r, Composite):
        return _composite_codec(btf, r)
    raise TypeKindError(f"cannot decode values of {r!r} (kind {r.kind.name})")


def _is_char(btf: Btf, t: Type) -> bool:
    r = resolve(btf, t)
    return isinstance(r, Int) and r.size == 1 and (bool(r.encoding & BtfIntEncoding.CHAR) or "char" in r.name)


def _array_codec(btf: Btf, a: Array) -> tuple[Decoder, Encoder]:
    elem = btf[a.type_id]
    n = a.nelems
    if _is_char(btf, elem):

        def cdec(d: bytes | memoryview, o: int) -> Any:
            return bytes(d[o : o + n])

        def cenc(b: bytearray, o: int, v: Any) -> None:
            raw = v.encode() if isinstance(v, str) else bytes(v)
            if len(raw) > n:
                raise ParseError(f"{len(raw)} bytes do not fit char[{n}]")
            b[o : o + len(raw)] = raw

        return cdec, cenc
    esize = sizeof(btf, elem)
    r = resolve(btf, elem)
    if isinstance(r, Int) and (r.size, r.signed) in _INT_FMT and r.bits == r.size * 8 and not r.is_bool:
        s = struct.Struct(f"<{n}{_INT_FMT[(r.size, r.signed)]}")
        return (lambda d, o: list(s.unpack_from(d, o))), (lambda b, o, v: s.pack_into(b, o, *_padded(v, n)))
    edec, eenc = _compile(btf, elem)

    def adec(d: bytes | memoryview, o: int) -> Any:
        return [edec(d, o + i * esize) for i in range(n)]

    def aenc(b: bytearray, o: int, v: Any) -> None:
        if len(v) > n:
            raise ParseError(f"{len(v)} elements do not fit an array of {n}")
        for i, x in enumerate(v):
            eenc(b, o + i * esize, x)

    return adec, aenc


def _padded(v: Any, n: int) -> list[int]:
    vals = [int(x) for x in v]
    if len(vals) > n:
        raise ParseError(f"{len(vals)} elements do not fit an array of {n}")
    return vals + [0] * (n - len(vals))


def _bits_codec(size: int, bit_off: int, bits: int, signed: bool, is_bool: bool, byte_base: int) -> tuple[Decoder, Encoder]:
    start = byte_base + bit_off // 8
    shift = bit_off % 8
    nbytes = (shift + bits + 7) // 8
    mask = (1 << bits) - 1

    def dec(d: bytes | memoryview, o: int) -> Any:
        v = (int.from_bytes(d[o + start : o + start + nbytes], "little") >> shift) & mask
        if signed and v >> (bits - 1):
            v -= 1 << bits
        return bool(v) if is_bool else v

    def enc(b: bytearray, o: int, v: Any) -> None:
        v = int(v)
        lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, mask)
        if not lo <= v <= hi:
            raise ParseError(f"{v} does not fit a {bits}-bit {'signed' if signed else 'unsigned'} bitfield")
        cur = int.from_bytes(b[o + start : o + start + nbytes], "little")
        cur = (cur & ~(mask << shift)) | ((v & mask) << shift)
        b[o + start : o + start + nbytes] = cur.to_bytes(nbytes, "little")

    return dec, enc


def _composite_codec(btf: Btf, c: Composite) -> tuple[Decoder, Encoder]:
    fields: list[tuple[str, Decoder, Encoder]] = []
    for f in btf.fields(c, flatten=True):
        if not f.name:
            continue
        if f.bitfield_size:
            r = resolve(btf, f.type)
            signed = (isinstance(r, Int) and r.signed) or (isinstance(r, Enum) and r.signed)
            fields.append((f.name, *_bits_codec(0, f.bit_offset, f.bitfield_size, signed, isinstance(r, Int) and r.is_bool, 0)))
            continue
        dec, enc = _compile(btf, f.type)
        off = f.offset
        fields.append((f.name, _shift_dec(dec, off), _shift_enc(enc, off)))
    name = c.name or f"anon_{c.kind.name.lower()}"
    names = [n for n, _, _ in fields]

    def cdec(d: bytes | memoryview, o: int) -> Any:
        return Record(name, {n: dec(d, o) for n, dec, _ in fields})

    def cenc(b: bytearray, o: int, v: Any) -> None:
        items = v._fields if isinstance(v, Record) else v
        unknown = set(items) - set(names)
        if unknown:
            raise ParseError(f"{name} has no field(s) {', '.join(sorted(unknown))}; it has {', '.join(names)}")
        for n, _, enc in fields:
            if n in items:
                enc(b, o, items[n])

    fast = _fast_struct(btf, c)
    if fast is not None:
        s, fnames, post = fast

        def fdec(d: bytes | memoryview, o: int) -> Any:
            vals = s.unpack_from(d, o)
            return Record(name, {k: (p(v) if p else v) for k, v, p in zip(fnames, vals, post, strict=True)})

        return fdec, cenc
    return cdec, cenc


def _fast_struct(btf: Btf, c: Composite):
    """One struct.Struct for a struct of plain scalars (no bitfields, unions, arrays or enums)."""
    if c.kind != BtfKind.STRUCT:
        return None
    fmt = ["<"]
    pos = 0
    names = []
    post: list[Callable[[Any], Any] | None] = []
    for f in btf.fields(c, flatten=True):
        r = resolve(btf, f.type)
        if f.bitfield_size or not f.name or f.bit_offset % 8:
            return None
        if isinstance(r, Int) and (r.size, r.signed) in _INT_FMT and r.bits == r.size * 8:
            code = _INT_FMT[(r.size, r.signed)]
            post.append(bool if r.is_bool else None)
        elif r.kind == BtfKind.PTR:
            code = "Q"
            post.append(None)
        else:
            return None
        off = f.offset
        if off < pos:
            return None
        if off > pos:
            fmt.append(f"{off - pos}x")
        fmt.append(code)
        pos = off + struct.calcsize("<" + code)
        names.append(f.name)
    if pos > c.size:
        return None
    return struct.Struct("".join(fmt)), names, post


def _shift_dec(dec: Decoder, off: int) -> Decoder:
    return lambda d, o: dec(d, o + off)


def _shift_enc(enc: Encoder, off: int) -> Encoder:
    return lambda b, o, v: enc(b, o + off, v)


_CACHE: dict[tuple[int, int], Codec] = {}


def codec(btf: Btf, t: Type | int | str) -> Codec:
    """The (cached) codec of a type given as object, id or name.

    :raises TypeKindError: the type has no values (void, function).
    :raises NotFoundError: unknown type.
    """
    tt = btf.type(t)
    key = (id(btf), tt.id)
    c = _CACHE.get(key)
    if c is None or c.btf is not btf or c.type is not tt:
        c = _CACHE[key] = Codec(btf, tt)
    return c


def decode(btf: Btf, t: Type | int | str, data: bytes | bytearray | memoryview, offset: int = 0) -> Any:
    """Decode ``data`` through type ``t`` (see the module table).

    :raises ParseError: ``data`` is too short.
    :raises TypeKindError: ``t`` has no values.
    """
    return codec(btf, t).decode(data, offset)


def encode(btf: Btf, t: Type | int | str, value: Any) -> bytes:
    """Encode ``value`` as type ``t``.

    :raises ParseError: a value does not fit (a ``ValueError``).
    :raises TypeKindError: ``t`` has no values.
    """
    return codec(btf, t).encode(value)

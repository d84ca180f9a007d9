"""Key/value codecs for maps and ring buffers (live and emulated): bytes ⇄ Python values.

A codec has ``size`` (bytes), ``encode(value) -> bytes`` and
``decode(buffer) -> value``. :func:`codec_for` picks one for a BTF type:
structured values go through :mod:`bpfmux.btf.codec`; integers, enums and
pointers are decoded here directly (they are the hot path of map keys); with no
BTF the value stays raw ``bytes`` (``int`` is accepted on input for 1/2/4/8
byte keys and values, little-endian).
"""

from __future__ import annotations

import struct
from typing import Any, Protocol

from .errors import BpfmuxError, NotFoundError, ParseError

_INT_FMT = {(1, False): "<B", (2, False): "<H", (4, False): "<I", (8, False): "<Q",
            (1, True): "<b", (2, True): "<h", (4, True): "<i", (8, True): "<q"}


class Codec(Protocol):
    """Converts one fixed-size kernel value."""

    size: int

    def encode(self, value: Any) -> bytes:
        """Python value → exactly ``size`` bytes.

        :raises ParseError: the value does not fit the type.
        """

    def decode(self, data: bytes | bytearray | memoryview) -> Any:
        """``size`` bytes → Python value."""


class RawCodec:
    """Uninterpreted bytes; ints accepted on input for 1/2/4/8-byte values."""

    __slots__ = ("size",)

    def __init__(self, size: int) -> None:
        self.size = size

    def encode(self, value: Any) -> bytes:
        """:raises ParseError: wrong length or an int that does not fit."""
        if isinstance(value, int) and self.size in (1, 2, 4, 8):
            try:
                return value.to_bytes(self.size, "little", signed=value < 0)
            except OverflowError:
                raise ParseError(f"{value} does not fit {self.size} bytes") from None
        try:
            b = bytes(value)
        except TypeError:
            raise ParseError(f"expected {self.size} bytes (or an int), got {type(value).__name__}") from None
        if len(b) != self.size:
            raise ParseError(f"expected {self.size} bytes, got {len(b)}")
        return b

    def decode(self, data: bytes | bytearray | memoryview) -> bytes:
        return bytes(data[: self.size])

    def __repr__(self) -> str:
        return f"RawCodec({self.size})"


class IntCodec:
    """A little-endian integer of 1, 2, 4 or 8 bytes.

    :raises ParseError: another size.
    """

    __slots__ = ("size", "signed", "_s")

    def __init__(self, size: int, signed: bool = False) -> None:
        if (size, signed) not in _INT_FMT:
            raise ParseError(f"no integer codec for {size} bytes")
        self.size, self.signed = size, signed
        self._s = struct.Struct(_INT_FMT[size, signed])

    def encode(self, value: Any) -> bytes:
        """:raises ParseError: not an int, or out of range."""
        if not isinstance(value, int):
            raise ParseError(f"expected an integer key/value, got {type(value).__name__}")
        try:
            return self._s.pack(value)
        except struct.error:
            # accept the other signedness when the bit pattern fits
            if not self.signed and -(1 << (self.size * 8 - 1)) <= value < 0:
                return (value & ((1 << (self.size * 8)) - 1)).to_bytes(self.size, "little")
            raise ParseError(f"{value} does not fit a {'signed' if self.signed else 'unsigned'} {self.size}-byte integer") from None

    def decode(self, data: bytes | bytearray | memoryview) -> int:
        return self._s.unpack_from(data)[0]

    def __repr__(self) -> str:
        return f"IntCodec({self.size}, signed={self.signed})"


class U64ListCodec:
    """An array of u64 (stack traces); decoding strips trailing zeros."""

    __slots__ = ("size", "_n")

    def __init__(self, size: int) -> None:
        self.size, self._n = size, size // 8

    def encode(self, value: Any) -> bytes:
        """:raises ParseError: too many entries."""
        vals = list(value)
        if len(vals) > self._n:
            raise ParseError(f"at most {self._n} entries")
        return struct.pack(f"<{self._n}Q", *vals, *([0] * (self._n - len(vals))))

    def decode(self, data: bytes | bytearray | memoryview) -> list[int]:
        vals = list(struct.unpack_from(f"<{self._n}Q", data))
        while vals and vals[-1] == 0:
            vals.pop()
        return vals


class BtfCodec:
    """A value described by a BTF type, through :mod:`bpfmux.btf.codec`
    (structs come back as ``Record`` objects; dicts/Records are accepted on
    input, as are raw bytes of the exact size)."""

    __slots__ = ("size", "type", "_impl")

    def __init__(self, t: Any, size: int, impl: Any) -> None:
        self.size, self.type, self._impl = size, t, impl

    def encode(self, value: Any) -> bytes:
        """:raises ParseError: the value does not match the type."""
        if isinstance(value, bytes | bytearray) and len(value) == self.size:
            return bytes(value)
        try:
            return bytes(self._impl.encode(value))
        except ParseError:
            raise
        except (TypeError, ValueError, KeyError, AttributeError, struct.error) as err:
            raise ParseError(f"value {value!r} does not fit {self.type!r}: {err}") from None

    def decode(self, data: bytes | bytearray | memoryview) -> Any:
        return self._impl.decode(data)

    def __repr__(self) -> str:
        return f"BtfCodec({self.type!r})"


def codec_for(btf: Any, type_id: int, size: int) -> Codec:
    """The codec for a value of BTF type ``type_id`` (``size`` bytes); raw
    bytes when there is no BTF, the type is unknown or has no values, or its
    size is not ``size``.

    :raises ParseError: never for a missing type: it falls back to raw bytes.
    """
    if btf is None or not type_id:
        return RawCodec(size)
    from .btf import codec as btf_codec
    from .btf.layout import TypeKindError

    try:
        t = btf.resolve(type_id)
        tsize = btf.sizeof(t)
    except (BpfmuxError, TypeKindError):  # unknown id, reference loop, or a type without size: stay raw
        return RawCodec(size)
    if tsize != size:
        return RawCodec(size)
    kind = type(t).__name__
    if kind in ("Int", "Enum", "Enum64", "Ptr") and size in (1, 2, 4, 8):
        signed = bool(getattr(t, "signed", False)) if kind != "Ptr" else False
        if getattr(t, "is_bool", False) is True:
            return IntCodec(size, False)
        return IntCodec(size, signed)
    try:
        impl = btf_codec.codec(btf, btf[type_id])
    except (BpfmuxError, TypeKindError):  # a type the BTF codec cannot decode: stay raw
        return RawCodec(size)
    return BtfCodec(btf[type_id], size, impl)


def datasec_variables(btf: Any, section: str) -> dict[str, tuple[int, int, Codec]]:
    """The variables of global-data section ``section`` (``.data``, ``.bss``,
    ``.rodata``, ``.data.foo``, …) as the object's BTF ``DATASEC`` lays them
    out: name → ``(offset, size, codec)``. Empty without BTF or without a
    ``DATASEC`` of that name (the section is then only raw bytes).

    Shared by the live and the emulated kernel's global-data maps.

    :raises NotFoundError: a variable of the ``DATASEC`` refers to a type id
        the BTF does not have (malformed object BTF).
    :raises ParseError: a variable's BTF record is malformed.
    """
    variables: dict[str, tuple[int, int, Codec]] = {}
    if btf is None:
        return variables
    try:
        ds = btf.find(section, "datasec")
    except NotFoundError:
        return variables
    for vs in ds.vars:
        var = btf[vs.type_id]
        variables[var.name] = (vs.offset, vs.size, codec_for(btf, var.type_id, vs.size))
    return variables

"""bytes ⇄ Python values through BTF types: checked against struct packing and clang's layouts (btf_kinds object)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from bpfmux.btf import Btf, TypeKindError
from bpfmux.btf.builder import BtfBuilder
from bpfmux.btf.codec import EnumInt, Record, codec, decode, encode
from bpfmux.errors import ParseError

KINDS = Btf.load(Path(__file__).resolve().parents[1] / "bpf" / "btf_kinds.bpf.o")


def test_scalar_struct_uses_the_fast_path_and_round_trips() -> None:
    b = BtfBuilder()
    u8 = b.int("unsigned char", 1)
    i32 = b.int("int", 4, signed=True)
    u64 = b.int("long long unsigned int", 8)
    bl = b.int("_Bool", 1, bool_=True)
    b.struct("ev", [("kind", u8), ("pid", i32), ("ts", u64), ("ok", bl), ("ptr", b.ptr(0))])
    btf = Btf.parse(b.write())
    raw = struct.pack("<B3xiQ?7xQ", 7, -5, 1 << 60, True, 0xFFFF8880_00000000)
    v = decode(btf, "ev", raw)
    assert isinstance(v, Record)
    assert (v.kind, v.pid, v.ts, v.ok, v.ptr) == (7, -5, 1 << 60, True, 0xFFFF888000000000)
    assert v["pid"] == -5 and v.as_dict()["ts"] == 1 << 60
    assert encode(btf, "ev", v) == raw
    assert encode(btf, "ev", {"pid": -5}) == struct.pack("<B3xiQ?7xQ", 0, -5, 0, False, 0)
    assert codec(btf, "ev") is codec(btf, "ev")
    with pytest.raises(ParseError):
        decode(btf, "ev", raw[:-1])
    with pytest.raises(ValueError):
        encode(btf, "ev", {"kind": 256})
    with pytest.raises(ValueError):
        encode(btf, "ev", {"nope": 1})
    with pytest.raises(AttributeError):
        _ = v.nope


def test_every_kind_from_a_clang_object() -> None:
    k = KINDS.find("kinds", "struct")
    size = KINDS.sizeof(k)
    buf = bytearray(size)
    lay = {f.name: f for f in KINDS.fields(k, flatten=True)}
    struct.pack_into("<i", buf, lay["x"].offset, -42)
    struct.pack_into("<hh", buf, lay["s1"].offset, 3, -4)
    struct.pack_into("<f", buf, lay["f"].offset, 1.5)
    struct.pack_into("<d", buf, lay["d"].offset, -2.25)
    buf[lay["ok"].offset] = 1
    buf[lay["name"].offset : lay["name"].offset + 5] = b"hello"
    struct.pack_into("<6i", buf, lay["mat"].offset, 1, 2, 3, 4, 5, 6)
    struct.pack_into("<Q", buf, lay["cb"].offset, 0xDEAD)
    bits_off = lay["bf"].offset
    # struct bits: a:3=5, b:5=17, c:7=-3, d:40=2**39+1, e='Z' (packed, little-endian bit order)
    word = 5 | (17 << 3) | ((-3 & 0x7F) << 8) | ((2**39 + 1) << 15)
    buf[bits_off : bits_off + 7] = word.to_bytes(7, "little")
    buf[bits_off + 7] = ord("Z")
    struct.pack_into("<QQ", buf, lay["big"].offset, 1, 2)
    v = decode(KINDS, k, bytes(buf))
    assert v.x == -42 and (v.s1, v.s2) == (3, -4) and v.l == struct.unpack("<q", struct.pack("<hhxxxx", 3, -4))[0]
    assert (v.f, v.d, v.ok) == (1.5, -2.25, True)
    assert v.name == b"hello" + bytes(11)
    assert v.mat == [[1, 2, 3], [4, 5, 6]]
    assert v.cb == 0xDEAD and v.cbs == [0, 0, 0, 0]
    assert (v.bf.a, v.bf.b, v.bf.c, v.bf.d, v.bf.e) == (5, 17, -3, 2**39 + 1, ord("Z"))
    assert v.big == 1 | (2 << 64)
    assert encode(KINDS, k, v) == bytes(buf)


def test_enums_decode_with_names() -> None:
    # clang 14 records every enum as unsigned (no kind_flag): -1 reads back as 0xffffffff
    e = decode(KINDS, "signed_enum", struct.pack("<i", -1))
    assert isinstance(e, EnumInt) and e == 0xFFFFFFFF and e.name == "NEG"
    b = BtfBuilder()
    b.enum("s", {"MINUS": -2, "PLUS": 2})
    signed = Btf.parse(b.write())
    assert decode(signed, "s", struct.pack("<i", -2)) == -2
    assert decode(signed, "s", struct.pack("<i", -2)).name == "MINUS"
    u = decode(KINDS, "big_unsigned", struct.pack("<I", 0xEFFFFFFF))
    assert u == 0xEFFFFFFF and u.name == "BIG"
    assert decode(KINDS, "signed_enum", struct.pack("<i", 77)).name is None
    assert encode(KINDS, "signed_enum", "TWO") == struct.pack("<i", 2)


def test_types_without_values() -> None:
    with pytest.raises(TypeKindError):
        codec(KINDS, "use_kinds")


@pytest.mark.parametrize("value", [
    {"x": 1 << 31},                        # int (struct fast path of the field)
    {"name": b"x" * 17},                   # char[16]
    {"mat": [[1, 2, 3]] * 3},              # int[2][3]: too many rows
    {"mat": [[1, 2, 3, 4]]},               # too many columns (packed row)
    {"mat": [[1 << 31, 0, 0]]},            # packed row element out of range
    {"bf": {"a": 8}},                      # 3-bit bitfield
    {"big": 1 << 128},                     # __int128
    {"f": 1e300},                          # float
    {"nope": 1},                           # no such field
])
def test_values_that_do_not_fit_raise_parse_error(value) -> None:
    with pytest.raises(ParseError):
        encode(KINDS, "kinds", value)

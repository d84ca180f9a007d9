"""Key/value codecs of the live maps (no kernel): round trips and bad input."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bpfmux.codecs import IntCodec, RawCodec, U64ListCodec, codec_for
from bpfmux.errors import ParseError


@given(st.sampled_from([1, 2, 4, 8]), st.booleans(), st.data())
def test_int_codec_round_trip(size: int, signed: bool, data) -> None:
    lo, hi = (-(1 << (size * 8 - 1)), (1 << (size * 8 - 1)) - 1) if signed else (0, (1 << (size * 8)) - 1)
    v = data.draw(st.integers(lo, hi))
    c = IntCodec(size, signed)
    b = c.encode(v)
    assert len(b) == size and c.decode(b) == v


@given(st.sampled_from([1, 2, 4, 8]), st.integers())
def test_int_codec_rejects_out_of_range_with_parse_error(size: int, v: int) -> None:
    c = IntCodec(size, False)
    if -(1 << (size * 8 - 1)) <= v < (1 << (size * 8)):
        assert len(c.encode(v)) == size
    else:
        with pytest.raises(ParseError):
            c.encode(v)


@given(st.binary(max_size=32), st.integers(0, 32))
def test_raw_codec_exact_size(data: bytes, size: int) -> None:
    c = RawCodec(size)
    if len(data) == size:
        assert c.decode(c.encode(data)) == data
    else:
        with pytest.raises(ParseError):
            c.encode(data)


def test_raw_codec_accepts_ints_for_word_sizes() -> None:
    assert RawCodec(4).encode(7) == b"\x07\0\0\0"
    assert RawCodec(8).encode(-1) == b"\xff" * 8
    with pytest.raises(ParseError):
        RawCodec(3).encode(7)
    with pytest.raises(ParseError):
        RawCodec(4).encode(1 << 40)
    with pytest.raises(ParseError):
        RawCodec(4).encode(object())


@given(st.lists(st.integers(0, (1 << 64) - 1), max_size=8))
def test_stack_codec_strips_trailing_zeros(ips: list[int]) -> None:
    c = U64ListCodec(64)
    out = c.decode(c.encode(ips))
    while ips and ips[-1] == 0:
        ips = ips[:-1]
    assert out == ips


def test_stack_codec_too_many() -> None:
    with pytest.raises(ParseError):
        U64ListCodec(16).encode([1, 2, 3])


def test_codec_for_without_btf_is_raw() -> None:
    assert isinstance(codec_for(None, 5, 4), RawCodec)


def test_codec_for_btf_ints_and_structs() -> None:
    from bpfmux.btf import Btf

    strings = b"\0int\0u64\0s\0a\0b\0"
    types = b"".join(
        [
            struct.pack("<III", 1, 1 << 24, 4) + struct.pack("<I", (1 << 24) | 32),  # [1] int (signed)
            struct.pack("<III", 5, 1 << 24, 8) + struct.pack("<I", 64),  # [2] u64
            struct.pack("<III", 9, (4 << 24) | 2, 16) + struct.pack("<III", 11, 1, 0) + struct.pack("<III", 13, 2, 64),
        ]
    )
    hdr = struct.pack("<HBBIIIII", 0xEB9F, 1, 0, 24, 0, len(types), len(types), len(strings))
    btf = Btf.parse(hdr + types + strings)
    c = codec_for(btf, 1, 4)
    assert isinstance(c, IntCodec) and c.signed and c.decode(c.encode(-5)) == -5
    assert isinstance(codec_for(btf, 2, 8), IntCodec)
    assert isinstance(codec_for(btf, 2, 4), RawCodec)  # size mismatch: stay raw
    s = codec_for(btf, 3, 16)  # a struct: bpfmux.btf.codec when present, raw bytes otherwise
    raw = struct.pack("<iiQ", 3, 0, 9)
    assert s.encode(s.decode(raw)) == raw

"""Binary encoding and decoding of instructions, validity of every opcode form, fuzzing."""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bpfmux.errors import ParseError
from bpfmux.isa import Insn, decode, encode
from bpfmux.isa.insn import slot_offsets
from bpfmux.isa.strategies import VALID_OPCODES, any_insns, valid_insns
from bpfmux.isa.validity import validate

# The valid opcodes, written out from the RFC 9669 tables plus the kernel's
# additions (may_goto 0xe5, load-acquire/store-release of 1 and 2 bytes
# 0xd3/0xcb), independently of bpfmux.isa.validity.
ALU_OPS = [0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x90, 0xA0, 0xB0, 0xC0]  # NEG and END apart
JMP_COND = [0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0xA0, 0xB0, 0xC0, 0xD0]
EXPECTED_OPCODES = sorted(
    [op | 0x04 | src for op in ALU_OPS for src in (0x00, 0x08)]
    + [0x84, 0xD4, 0xDC]  # neg32, le, be
    + [op | 0x07 | src for op in ALU_OPS for src in (0x00, 0x08)]
    + [0x87, 0xD7]  # neg, bswap
    + [0x05, 0x85, 0x8D, 0x95, 0xE5]  # ja, call, callx, exit, may_goto
    + [op | 0x05 | src for op in JMP_COND for src in (0x00, 0x08)]
    + [0x06]  # ja32
    + [op | 0x06 | src for op in JMP_COND for src in (0x00, 0x08)]
    + [0x18, 0x20, 0x28, 0x30, 0x40, 0x48, 0x50]  # lddw, ld abs/ind b/h/w
    + [0x61, 0x69, 0x71, 0x79, 0x81, 0x89, 0x91]  # ldx, ldxs
    + [0x62, 0x6A, 0x72, 0x7A]  # st
    + [0x63, 0x6B, 0x73, 0x7B, 0xC3, 0xCB, 0xD3, 0xDB]  # stx, atomics
)


def test_valid_opcode_set_matches_the_specification() -> None:
    assert list(VALID_OPCODES) == EXPECTED_OPCODES
    assert len(EXPECTED_OPCODES) == 129


@settings(max_examples=3000, suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(valid_insns())
def test_round_trip_valid(insn: Insn) -> None:
    data = insn.encode()
    assert len(data) == 8 * insn.size
    assert decode(data, strict=True) == [insn]


@settings(max_examples=500, suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(st.lists(valid_insns(), min_size=1, max_size=20))
def test_round_trip_programs(insns: list[Insn]) -> None:
    data = encode(insns)
    assert decode(data) == insns
    assert slot_offsets(insns)[-1] + insns[-1].size == len(data) // 8


@given(any_insns())
def test_round_trip_any_fields(insn: Insn) -> None:
    # the binary form keeps every field, valid or not (lddw aside: its imm is 64-bit)
    if insn.opcode == 0x18:
        insn = Insn(0x18, insn.dst, insn.src, insn.off, insn.imm & 0xFFFFFFFF)
    assert decode(insn.encode()) == [insn]


def test_known_words() -> None:
    # mov r1, 2 ; lddw r2, 0x1122334455667788 ; ja -4 ; exit
    data = bytes.fromhex("b701000002000000180200008877665500000000443322110500fcff000000009500000000000000")
    assert decode(data) == [
        Insn(0xB7, 1, 0, 0, 2),
        Insn(0x18, 2, 0, 0, 0x1122334455667788),
        Insn(0x05, 0, 0, -4, 0),
        Insn(0x95),
    ]
    assert encode(decode(data)) == data


def test_unsigned_immediate_encodes_like_signed() -> None:
    assert Insn(0xB7, 1, 0, 0, 0xFFFFFFFF).encode() == Insn(0xB7, 1, 0, 0, -1).encode()


def test_lddw_negative_immediate() -> None:
    assert Insn(0x18, 1, 0, 0, -1).encode() == Insn(0x18, 1, 0, 0, (1 << 64) - 1).encode()
    with pytest.raises(ParseError, match="does not fit 64 bits"):
        Insn(0x18, 1, 0, 0, 1 << 64).encode()


@pytest.mark.parametrize(
    ("insn", "message"),
    [
        (Insn(0xB7, 16), "register out of range"),
        (Insn(0xB7, 0, 0, 1 << 15), "offset 32768 does not fit 16 bits"),
        (Insn(0xB7, 0, 0, 0, 1 << 32), "does not fit 32 bits"),
    ],
)
def test_encode_rejects_out_of_range(insn: Insn, message: str) -> None:
    with pytest.raises(ParseError, match=message):
        insn.encode()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"\x95" * 7, "not a multiple of 8"),
        (bytes.fromhex("1801000001000000"), "lddw without its second slot"),
        (bytes.fromhex("18010000010000009500000000000000"), "second slot must have opcode, registers and offset 0"),
        (bytes.fromhex("18010000010000000001000000000000"), "regs=0x01"),
        (bytes.fromhex("18010000010000000000010000000000"), "off=1"),
    ],
)
def test_decode_rejects_malformed(data: bytes, message: str) -> None:
    with pytest.raises(ParseError, match=message) as info:
        decode(data, source="prog.o")
    assert str(info.value).startswith("prog.o: ")


@pytest.mark.parametrize(
    ("insn", "message"),
    [
        (Insn(0xFF), "op 0xff (0xff): unknown ALU64 operation 0xf0"),
        (Insn(0x8C, 1, 2), "neg has no register-source form"),
        (Insn(0xDF, 1, 0, 0, 16), "ALU64 | END | X is not defined"),
        (Insn(0xD4, 1, 0, 0, 8), "byte swap width imm=8 must be 16, 32 or 64"),
        (Insn(0x3F, 1, 2, 2, 0), "off=2 must be 0 (unsigned) or 1 (signed)"),
        (Insn(0xBC, 1, 2, 32, 0), "off=32 must be one of 0, 8, 16"),
        (Insn(0xBF, 1, 2, 1, 5), "needs imm 0x1 or 0x10000"),
        (Insn(0x0F, 1, 11), "src register r11 does not exist"),
        (Insn(0xB7, 11), "dst register r11 does not exist"),
        (Insn(0x0D), "ja has no register-source form"),
        (Insn(0x06, 0, 0, 1, 5), "ja32 (0x06): reserved field off=1 must be 0"),
        (Insn(0x86), "unknown JMP32 operation 0x80"),
        (Insn(0x85, 0, 3, 0, 1), "unknown call kind src=3"),
        (Insn(0x85, 0, 1, 4, 1), "call (0x85): reserved field off=4 must be 0"),
        (Insn(0x8D, 1, 0, 0, 1), "callx (0x8d): reserved field imm=1 must be 0"),
        (Insn(0x9D), "exit has no register-source form"),
        (Insn(0xE5, 0, 1, 1, 0), "unknown conditional pseudo-jump src=1"),
        (Insn(0xED), "may_goto has no register-source form"),
        (Insn(0xF5), "unknown JMP operation 0xf0"),
        (Insn(0x18, 1, 7, 0, 0), "unknown pseudo source 7"),
        (Insn(0x18, 1, 0, 1, 0), "lddw (0x18): reserved field off=1 must be 0"),
        (Insn(0x18, 1, 1, 0, 3 | (1 << 32)), "second slot=0x1 must be 0 for MAP_FD"),
        (Insn(0x00), "unknown LD instruction"),
        (Insn(0x38), "unknown LD instruction"),
        (Insn(0x20, 1, 0, 0, 4), "ldabsw (0x20): reserved field dst=1 must be 0"),
        (Insn(0x99, 1, 2), "unknown LDX instruction"),
        (Insn(0x41, 1, 2), "unknown LDX instruction"),
        (Insn(0x82, 1, 0, 0, 1), "unknown ST instruction"),
        (Insn(0xA3, 1, 2), "unknown STX instruction"),
        (Insn(0xD3, 1, 2, 0, 0), "atomics exist only for 4 and 8 bytes"),
        (Insn(0xDB, 1, 2, 0, 0x02), "unknown atomic operation imm=0x2"),
        (Insn(0xDB, 1, 2, 0, 0xE0), "unknown atomic operation imm=0xe0"),
        (Insn(0x07, 1, 0, 0, 1 << 31), "does not fit signed 32 bits"),
    ],
)
def test_validate_names_the_problem(insn: Insn, message: str) -> None:
    with pytest.raises(ParseError) as info:
        validate(insn)
    assert message in str(info.value)


def test_kfunc_call_may_carry_module_btf_index() -> None:
    validate(Insn(0x85, 0, 2, 4, 1))


def test_strict_decode_names_slot() -> None:
    data = Insn(0x18, 1, 0, 0, 5).encode() + Insn(0x95, 0, 0, 0, 1).encode()
    assert decode(data)[1] == Insn(0x95, 0, 0, 0, 1)
    with pytest.raises(ParseError, match=r"slot 2: exit \(0x95\): reserved field imm=1 must be 0"):
        decode(data, strict=True)


@settings(max_examples=5000)
@given(st.binary(max_size=256))
def test_fuzz_decode_raises_only_parse_error(data: bytes) -> None:
    for strict in (False, True):
        try:
            insns = decode(data, strict=strict)
        except ParseError:
            continue
        assert encode(insns) == data


@settings(max_examples=3000)
@given(st.lists(st.tuples(st.integers(0, 255), st.integers(0, 255), st.integers(-(1 << 15), (1 << 15) - 1))))
def test_fuzz_decode_structured(words: list[tuple[int, int, int]]) -> None:
    # instruction-shaped input reaches deeper than random bytes
    data = b"".join(struct.pack("<BBhi", op, regs, off, op * 7) for op, regs, off in words)
    try:
        insns = decode(data, strict=True)
    except ParseError:
        return
    for insn in insns:
        validate(insn)

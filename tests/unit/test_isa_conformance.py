"""The case-file reader of the bpf_conformance suite."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bpfmux.errors import ParseError
from bpfmux.isa import Insn
from bpfmux.isa.conformance import load_case, load_suite, parse_case

SUITE = Path(__file__).resolve().parents[1] / "data" / "conformance"


def test_case_with_mem_and_result() -> None:
    case = load_case(SUITE / "ldxh.data")
    assert case.name == "ldxh" and case.path == SUITE / "ldxh.data"
    assert case.mem == bytes([0xAA, 0xBB, 0x11, 0x22, 0xCC, 0xDD])
    assert case.result == 0x2211
    assert case.error is None and not case.negative and case.raw is None
    assert case.program() == [Insn(0x69, 0, 1, 2, 0), Insn(0x95)]


def test_raw_words_and_asm_agree() -> None:
    case = load_case(SUITE / "lddw.data")
    assert case.raw == bytes.fromhex("180000008877665500000000443322119500000000000000")
    assert case.program() == [Insn(0x18, 0, 0, 0, 0x1122334455667788), Insn(0x95)]


def test_informational_sections() -> None:
    case = load_case(SUITE / "callx.data")
    assert case.extra == {"no register offset": "call instruction"}
    assert case.result == 2
    assert load_case(SUITE / "mem-len.data").extra == {"no register offset": ""}
    assert "c" in load_case(SUITE / "prime.data").extra


def test_negative_directory_marks_cases() -> None:
    case = load_case(SUITE / "negative" / "unused-exit-imm.data")
    assert case.negative and case.error == "" and case.asm is None
    assert case.raw is not None and len(case.raw) == 16
    assert load_case(SUITE / "negative" / "invalid_lock.data").error == "Invalid number of operands for lock"
    # not under negative/ but with -- error: still negative
    assert parse_case("-- asm\nexit\n-- error\nboom\n").negative


def test_result_is_unsigned_64() -> None:
    assert parse_case("-- asm\nexit\n-- result\n0xffffffffffffffff\n").result == (1 << 64) - 1
    assert parse_case("-- asm\nexit\n-- result\n-0x1\n").result == (1 << 64) - 1


def test_asm_and_raw_disagree() -> None:
    case = parse_case("-- asm\nmov %r0, 1\nexit\n-- raw\n0x00000002000000b7\n0x0000000000000095\n")
    with pytest.raises(ParseError, match="-- asm and -- raw disagree: instruction 0"):
        case.program()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("-- asm\nexit\n-- bogus\n", "line 3: unknown section '-- bogus'"),
        ("-- asm\nexit\n-- asm\nexit\n", "section '-- asm' appears twice"),
        ("exit\n-- asm\nexit\n", "line 1: text before the first"),
        ("-- raw\n95 00 00\n", "-- raw holds 3 bytes, not a multiple of 8"),
        ("-- raw\n0xzz\n", "'0xzz' is not a two-digit hex byte"),
        ("-- mem\n1 2\n", "-- mem: '1' is not a two-digit hex byte"),
        ("-- result\n0x1 0x2\n", "-- result must hold one number"),
        ("-- result\nxyz\n", "-- result is not hex"),
        ("-- result\n\n", "-- result must hold one number, found 0"),
    ],
)
def test_malformed_case_files(text: str, message: str) -> None:
    with pytest.raises(ParseError) as info:
        parse_case(text, name="t.data")
    assert message in str(info.value)
    assert str(info.value).startswith("t.data: ")


def test_case_without_program() -> None:
    with pytest.raises(ParseError, match="no -- asm or -- raw section"):
        parse_case("-- result\n0x0\n").program()


def test_non_utf8_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.data"
    bad.write_bytes(b"-- asm\n\xff\xfe\n")
    with pytest.raises(ParseError, match="not UTF-8"):
        load_case(bad)


def test_load_suite_lists_sorted_data_files(tmp_path: Path) -> None:
    for name in ("b.data", "a.data", "notes.txt"):
        (tmp_path / name).write_text("-- asm\nexit\n")
    assert [p.name for p in load_suite(tmp_path)] == ["a.data", "b.data"]


def test_every_suite_file_parses() -> None:
    cases = [load_case(p) for p in load_suite(SUITE)]
    assert len(cases) == 313
    assert all(c.asm and c.result is not None and not c.negative for c in cases)
    assert sum(1 for c in cases if c.mem) == 40


@settings(max_examples=3000, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.sampled_from(
                ["-- asm", "-- raw", "-- mem", "-- result", "-- error", "-- c", "-- no register offset", "-- x"]
            ),
            st.sampled_from(["exit", "mov %r0, 1", "0x95", "95 00 00 00 00 00 00 00", "aa bb", "0x11", "# c", ""]),
            st.text(max_size=20),
        ),
        max_size=12,
    ).map("\n".join)
)
def test_fuzz_parse_case(text: str) -> None:
    try:
        case = parse_case(text)
        case.program()
    except ParseError:
        pass

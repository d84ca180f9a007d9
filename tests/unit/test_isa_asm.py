"""The conformance-syntax assembler: the whole bpf_conformance suite, encodings, errors, fuzzing."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bpfmux.errors import ParseError
from bpfmux.isa import Insn, decode, encode
from bpfmux.isa.asm import assemble, format_asm, format_program
from bpfmux.isa.conformance import load_case, load_suite
from bpfmux.isa.strategies import valid_insns

SUITE = Path(__file__).resolve().parents[1] / "data" / "conformance"
POSITIVE = load_suite(SUITE)
NEGATIVE = load_suite(SUITE / "negative")


def test_suite_is_complete() -> None:
    assert len(POSITIVE) == 313
    assert len(NEGATIVE) == 60


@pytest.mark.parametrize("path", POSITIVE, ids=[p.stem for p in POSITIVE])
def test_conformance_program_assembles(path: Path) -> None:
    case = load_case(path)
    assert case.asm is not None and case.result is not None
    insns = case.program()
    assert insns, "a conformance program has instructions"
    # what we assemble survives the binary encoding unchanged
    assert decode(encode(insns), strict=True) == insns
    if case.raw is not None:
        assert encode(insns) == case.raw


def test_raw_words_of_lddw_case() -> None:
    # the one positive case with -- raw: its 64-bit words, spelled out
    insns = assemble((SUITE / "lddw.data").read_text().split("-- asm")[1].split("-- raw")[0])
    words = [int.from_bytes(encode(insns)[i : i + 8], "little") for i in range(0, 24, 8)]
    assert words == [0x5566778800000018, 0x1122334400000000, 0x0000000000000095]


# Each negative case and a piece of the message it must fail with. Cases in
# the suite's "-- error" wording keep that wording.
ASM_ERRORS = {
    "empty": "no program",
    "empty_instructions": "no program",
    "invalid_imm32_dec_range": "Invalid immediate: 2147483648",
    "invalid_imm32_hex_range": "Invalid immediate: 0x100000000",
    "invalid_label": "Invalid label: NOT_A_LABEL",
    "invalid_lock": "Invalid number of operands for lock",
    "invalid_lock2": "Invalid number of operands for lock",
    "invalid_mnemonic": "Invalid mnemonic: ldxq",
    "invalid_offset": "Invalid memory operand: '%r1'",
    "invalid_offset_range": "Invalid offset: +0x10000",
    "invalid_operand_count": "Invalid number of operands for mnemonic: lddw",
    "invalid_register": "Invalid register: '%r50'",
    "invalid_unknown_directive": "unknown section '-- Unknown directive'",
}
# Negative cases whose program is well-formed: the rejection is the
# verifier's or the VM's job, not the assembler's.
NOT_ASSEMBLER_ERRORS = {
    # "or %r0, %r10": reads r0 before it is written, and ORs the frame pointer
    "error": "verifier",
    # correct program, wrong expected value (0x89... instead of 0x88...)
    "incorrect_return_value_high_bits": "result",
}


def _raw_case_expectation(name: str) -> tuple[str, str]:
    """For unused-MNEM-FIELD cases: the instruction name and the field that must be named."""
    _, _, rest = name.partition("unused-")
    mnem, _, field = rest.rpartition("-")
    field = {"offset": "off"}.get(field, field)
    return mnem, field


@pytest.mark.parametrize("path", NEGATIVE, ids=[p.stem for p in NEGATIVE])
def test_conformance_negative_case(path: Path) -> None:
    name = path.stem
    if name in NOT_ASSEMBLER_ERRORS:
        case = load_case(path)
        insns = case.program()
        assert insns and case.negative
        if NOT_ASSEMBLER_ERRORS[name] == "result":
            # the stated result differs from the bytes the program loads (little endian), and the VM
            # returns the bytes, not the stated result
            from bpfmux.emu.vm.machine import VM

            loaded = int.from_bytes(case.mem[2:10], "little")
            assert case.result != loaded
            with VM() as vm:
                for tier in ("checked", "fast"):
                    assert vm.load(insns).run(bytearray(case.mem), tier=tier).r0 == loaded
        else:
            from bpfmux.emu.verifier.core import verify
            from bpfmux.errors import VerifierError
            from bpfmux.uapi import ProgType

            assert case.error == "Invalid"
            with pytest.raises(VerifierError):  # the verifier names the problem: r0 read before written
                verify(insns, ProgType.SYSCALL)
        return
    with pytest.raises(ParseError) as info:
        load_case(path).program()
    message = str(info.value)
    if name in ASM_ERRORS:
        assert ASM_ERRORS[name] in message
        return
    mnem, field = _raw_case_expectation(name)
    assert name.startswith("unused-")
    # names the slot, the instruction and the reserved field
    assert "slot 0" in message
    assert f"{field}=" in message, message
    base = mnem.split("_")[0].replace("64", "")
    assert base in message, message


def test_negative_table_covers_every_case() -> None:
    names = {p.stem for p in NEGATIVE}
    raw = {n for n in names if n.startswith("unused-")}
    assert names == set(ASM_ERRORS) | set(NOT_ASSEMBLER_ERRORS) | raw
    assert len(raw) == 45


# --- encodings, checked against the RFC 9669 opcode tables by hand ----------

ENCODINGS = [
    ("add32 %r1, 5", Insn(0x04, 1, 0, 0, 5)),
    ("add32 %r1, %r2", Insn(0x0C, 1, 2, 0, 0)),
    ("add %r1, -3", Insn(0x07, 1, 0, 0, -3)),
    ("add64 %r1, %r2", Insn(0x0F, 1, 2, 0, 0)),
    ("sub %r3, 0xffffffff", Insn(0x17, 3, 0, 0, -1)),
    ("mul32 %r1, %r2", Insn(0x2C, 1, 2, 0, 0)),
    ("div %r1, 7", Insn(0x37, 1, 0, 0, 7)),
    ("sdiv %r1, 7", Insn(0x37, 1, 0, 1, 7)),
    ("sdiv32 %r1, %r2", Insn(0x3C, 1, 2, 1, 0)),
    ("or %r1, %r9", Insn(0x4F, 1, 9, 0, 0)),
    ("and32 %r1, 0x0f0f0f0f", Insn(0x54, 1, 0, 0, 0x0F0F0F0F)),
    ("lsh %r0, 63", Insn(0x67, 0, 0, 0, 63)),
    ("rsh32 %r0, %r7", Insn(0x7C, 0, 7, 0, 0)),
    ("neg32 %r0", Insn(0x84, 0)),
    ("neg %r2", Insn(0x87, 2)),
    ("mod %r0, %r1", Insn(0x9F, 0, 1, 0, 0)),
    ("smod32 %r0, -3", Insn(0x94, 0, 0, 1, -3)),
    ("xor %r0, 0x03", Insn(0xA7, 0, 0, 0, 3)),
    ("mov32 %r0, -10", Insn(0xB4, 0, 0, 0, -10)),
    ("mov %r0, %r1", Insn(0xBF, 0, 1, 0, 0)),
    ("arsh32 %r1, 31", Insn(0xC4, 1, 0, 0, 31)),
    ("arsh %r2, %r3", Insn(0xCF, 2, 3, 0, 0)),
    ("movsx832 %r0, %r1", Insn(0xBC, 0, 1, 8, 0)),
    ("movsx1632 %r4, %r3", Insn(0xBC, 4, 3, 16, 0)),
    ("movsx864 %r6, %r5", Insn(0xBF, 6, 5, 8, 0)),
    ("movsx1664 %r8, %r7", Insn(0xBF, 8, 7, 16, 0)),
    ("movsx3264 %r0, %r9", Insn(0xBF, 0, 9, 32, 0)),
    ("le16 %r0", Insn(0xD4, 0, 0, 0, 16)),
    ("le64 %r0", Insn(0xD4, 0, 0, 0, 64)),
    ("be32 %r3", Insn(0xDC, 3, 0, 0, 32)),
    ("bswap16 %r0", Insn(0xD7, 0, 0, 0, 16)),
    ("swap64 %r0", Insn(0xD7, 0, 0, 0, 64)),
    ("lddw %r0, 0x1122334455667788", Insn(0x18, 0, 0, 0, 0x1122334455667788)),
    ("lddw %r1, 0xFFFFFFFFFFFFFFFF", Insn(0x18, 1, 0, 0, 0xFFFFFFFFFFFFFFFF)),
    ("lddw %r1, -1", Insn(0x18, 1, 0, 0, 0xFFFFFFFFFFFFFFFF)),
    ("lddw %r1, map_fd(3)", Insn(0x18, 1, 1, 0, 3)),
    ("lddw %r1, map_value(3, 16)", Insn(0x18, 1, 2, 0, 3 | (16 << 32))),
    ("lddw %r1, btf_id(77)", Insn(0x18, 1, 3, 0, 77)),
    ("lddw %r1, map_idx(2)", Insn(0x18, 1, 5, 0, 2)),
    ("lddw %r1, map_idx_value(2, 8)", Insn(0x18, 1, 6, 0, 2 | (8 << 32))),
    ("ldxb %r0, [%r1+0x2]", Insn(0x71, 0, 1, 2, 0)),
    ("ldxh %r0, [%r10-2]", Insn(0x69, 0, 10, -2, 0)),
    ("ldxw %r0, [%r1]", Insn(0x61, 0, 1, 0, 0)),
    ("ldxdw %r2, [%r10-8]", Insn(0x79, 2, 10, -8, 0)),
    ("ldxsb %r0, [%r10-1]", Insn(0x91, 0, 10, -1, 0)),
    ("ldxsh %r0, [%r10-2]", Insn(0x89, 0, 10, -2, 0)),
    ("ldxsw %r0, [%r10-4]", Insn(0x81, 0, 10, -4, 0)),
    ("stb [%r10-1], 0x80", Insn(0x72, 10, 0, -1, 0x80)),
    ("sth [%r10-2], 0x8001", Insn(0x6A, 10, 0, -2, 0x8001)),
    ("stw [%r10-4], 1", Insn(0x62, 10, 0, -4, 1)),
    ("stdw [%r10-8], 0x11223344", Insn(0x7A, 10, 0, -8, 0x11223344)),
    ("stxb [%r0+1], %r9", Insn(0x73, 0, 9, 1, 0)),
    ("stxh [%r1+2], %r2", Insn(0x6B, 1, 2, 2, 0)),
    ("stxw [%r10-4], %r1", Insn(0x63, 10, 1, -4, 0)),
    ("stxdw [%r10-8], %r0", Insn(0x7B, 10, 0, -8, 0)),
    ("lock add [%r10-8], %r1", Insn(0xDB, 10, 1, -8, 0x00)),
    ("lock add32 [%r10-4], %r1", Insn(0xC3, 10, 1, -4, 0x00)),
    ("lock fetch add [%r10-8], %r1", Insn(0xDB, 10, 1, -8, 0x01)),
    ("lock or [%r10-8], %r1", Insn(0xDB, 10, 1, -8, 0x40)),
    ("lock fetch and32 [%r10-4], %r3", Insn(0xC3, 10, 3, -4, 0x51)),
    ("lock xor [%r10-8], %r1", Insn(0xDB, 10, 1, -8, 0xA0)),
    ("lock xchg [%r10-8], %r1", Insn(0xDB, 10, 1, -8, 0xE1)),
    ("lock cmpxchg32 [%r10-8], %r1", Insn(0xC3, 10, 1, -8, 0xF1)),
    ("ldacqw %r0, [%r1+4]", Insn(0xC3, 0, 1, 4, 0x100)),
    ("streldw [%r1+8], %r2", Insn(0xDB, 1, 2, 8, 0x110)),
    ("ja +3", Insn(0x05, 0, 0, 3, 0)),
    ("ja -1", Insn(0x05, 0, 0, -1, 0)),
    ("ja32 +70000", Insn(0x06, 0, 0, 0, 70000)),
    ("jeq %r1, 0x80000000, +1", Insn(0x15, 1, 0, 1, -0x80000000)),
    ("jgt %r1, %r2, +2", Insn(0x2D, 1, 2, 2, 0)),
    ("jge32 %r1, 0xb, +1", Insn(0x36, 1, 0, 1, 0xB)),
    ("jset %r1, %r2, +1", Insn(0x4D, 1, 2, 1, 0)),
    ("jne32 %r1, 0x100, +4", Insn(0x56, 1, 0, 4, 0x100)),
    ("jsgt %r1, %r2, +1", Insn(0x6D, 1, 2, 1, 0)),
    ("jsge32 %r4, -1, +1", Insn(0x76, 4, 0, 1, -1)),
    ("jlt %r2, %r3, +1", Insn(0xAD, 2, 3, 1, 0)),
    ("jle32 %r1, %r2, +1", Insn(0xBE, 1, 2, 1, 0)),
    ("jslt %r1, -1, +1", Insn(0xC5, 1, 0, 1, -1)),
    ("jsle32 %r5, %r6, +1", Insn(0xDE, 5, 6, 1, 0)),
    ("call 5", Insn(0x85, 0, 0, 0, 5)),
    ("call helper 6", Insn(0x85, 0, 0, 0, 6)),
    ("call local +2", Insn(0x85, 0, 1, 0, 2)),
    ("call runtime 1234", Insn(0x85, 0, 2, 0, 1234)),
    ("call runtime 1234, 3", Insn(0x85, 0, 2, 3, 1234)),
    ("call %r2", Insn(0x8D, 2, 0, 0, 0)),
    ("exit", Insn(0x95)),
    ("may_goto +4", Insn(0xE5, 0, 0, 4, 0)),
    ("ldabsw 12", Insn(0x20, 0, 0, 0, 12)),
    ("ldindh %r3, 2", Insn(0x48, 0, 3, 0, 2)),
    ("addr_space_cast %r1, %r2, 1, 0", Insn(0xBF, 1, 2, 1, 0x10000)),
]


@pytest.mark.parametrize(("text", "insn"), ENCODINGS, ids=[t for t, _ in ENCODINGS])
def test_encoding(text: str, insn: Insn) -> None:
    # every case is followed by enough instructions for its jump to land on
    assert assemble(text + "\nexit\nexit\nexit\nexit\nexit\n")[0] == insn


def test_labels_count_slots_and_exit_is_implicit() -> None:
    insns = assemble(
        """
        jeq %r1, 0, target   # forward over an lddw (2 slots)
        lddw %r0, 1
        target: mov %r0, 2
        jne %r0, 2, exit     # "exit" is the first exit instruction
        ja32 back
        exit
        back:
        call local func
        exit
        func:
        exit
        """
    )
    assert insns[0].off == 2  # target is slot 3; jump at slot 0
    assert insns[3].off == 1  # first exit is slot 6, jne at slot 4
    assert insns[4].imm == 1  # back is slot 7, ja32 at slot 5
    assert insns[6] == Insn(0x85, 0, 1, 0, 1)  # func at slot 9, call at 7


def test_label_after_last_instruction_is_an_error() -> None:
    with pytest.raises(ParseError, match="Invalid label: end points past the last instruction"):
        assemble("ja end\nexit\nend:\n")


def test_duplicate_label() -> None:
    with pytest.raises(ParseError, match="Duplicate label: a") as info:
        assemble("a:\nexit\na:\nexit\n")
    assert info.value.offset == 3


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("mov %r11, 1", "Invalid register: '%r11'"),
        ("mov r1, 1", "Invalid register: 'r1'"),
        ("mov %r1", "Invalid number of operands for mnemonic: mov takes 2, got 1"),
        ("exit %r0", "Invalid number of operands for mnemonic: exit"),
        ("add %r1, 1,", "Invalid number of operands"),
        ("mov32 %r0, -2147483649", "Invalid immediate"),
        ("lddw %r0, 0x10000000000000000", "does not fit 64 bits"),
        ("ldxw %r0, [%r1+32768]", "Invalid offset"),
        ("ja +32768", "Invalid jump offset"),
        ("jeq %r1, 1, 5", "Invalid label: '5'"),
        ("lock fetch xchg [%r1], %r2", "xchg always fetches"),
        ("lock nand [%r1], %r2", "Invalid atomic operation: nand"),
        ("call local", "Invalid number of operands for mnemonic: call"),
        ("call far 3", "Invalid call mode: far"),
        ("lddw %r1, map_fd(1, 2)", "Invalid number of operands for map_fd"),
        ("lddw %r1, map_ptr(1)", "Invalid lddw operand: map_ptr"),
        ("ldxw %r0, [%r1*4]", "Invalid register: '%r1*4'"),
        ("ldxw %r0, (%r1)", "Invalid memory operand"),
        ("mov %r0, 1.5", "Invalid immediate: '1.5'"),
    ],
)
def test_assembler_errors(text: str, message: str) -> None:
    with pytest.raises(ParseError) as info:
        assemble(text + "\nexit\n")
    assert message in str(info.value)


@pytest.mark.parametrize("text", ["", "# only a comment\n", "label:\n", "\n\n  \n"])
def test_empty_program(text: str) -> None:
    with pytest.raises(ParseError, match="Invalid program: no instructions"):
        assemble(text)


def test_error_carries_line_number_and_source() -> None:
    with pytest.raises(ParseError) as info:
        assemble("mov %r0, 0\n\nbogus %r1\nexit\n", source="prog.s")
    assert info.value.offset == 3
    assert str(info.value).startswith("prog.s: line 3: Invalid mnemonic: bogus")


# --- round trip through the printer ---------------------------------------------


@settings(max_examples=2000, suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(valid_insns())
def test_format_asm_round_trips(insn: Insn) -> None:
    text = format_asm(insn)
    # targets are relative, so pad with enough instructions to keep them in range
    back = assemble(text + "\n" + "exit\n")[0]
    assert back == insn, text


def test_format_program_round_trips_conformance_suite() -> None:
    for path in POSITIVE:
        insns = load_case(path).program()
        assert assemble(format_program(insns)) == insns, path.name


def test_format_asm_rejects_invalid() -> None:
    with pytest.raises(ParseError, match="reserved field imm=1"):
        format_asm(Insn(0x95, imm=1))


# --- fuzzing: arbitrary text only ever raises ParseError ------------------------

_WORDS = st.sampled_from(
    [
        "mov",
        "mov32",
        "add",
        "lddw",
        "ldxw",
        "stxdw",
        "stw",
        "lock",
        "fetch",
        "xchg",
        "cmpxchg32",
        "ja",
        "ja32",
        "jeq",
        "jsle32",
        "call",
        "local",
        "runtime",
        "helper",
        "exit",
        "be16",
        "movsx832",
        "neg",
        "%r0",
        "%r1",
        "%r10",
        "%r11",
        "[%r1+4]",
        "[%r10-8]",
        "[%r1]",
        "[",
        "]",
        "+",
        "-",
        ",",
        ":",
        "lbl",
        "lbl:",
        "0x",
        "0xffffffff",
        "-1",
        "+1",
        "-32769",
        "007",
        "+08",
        "map_fd(",
        ")",
        "func(lbl)",
        "#",
        "\n",
    ]  # fmt: skip
)


@settings(max_examples=3000, deadline=None)
@given(st.lists(_WORDS, max_size=30).map(" ".join))
def test_fuzz_assembler_tokens(text: str) -> None:
    try:
        insns = assemble(text)
    except ParseError:
        return
    assert decode(encode(insns)) == insns


def test_decimal_with_leading_zeros() -> None:
    assert assemble("mov %r0, 007\nldxw %r0, [%r1+010]\nexit")[:2] == [Insn(0xB7, 0, 0, 0, 7), Insn(0x61, 0, 1, 10, 0)]
    assert assemble("jeq %r1, 0x0010, +00\nexit")[0] == Insn(0x15, 1, 0, 0, 16)


_NUMBER = st.builds(
    "".join,
    st.tuples(
        st.sampled_from(["", "+", "-"]),
        st.sampled_from(["", "0x", "0X"]),
        st.text(alphabet="0123456789abcdefABCDEF_\u0661", min_size=0, max_size=22),
    ),
)


@settings(max_examples=2000, deadline=None)
@given(
    st.sampled_from(["mov %r0, {}", "lddw %r1, {}", "ldxw %r0, [%r1+{}]", "ja {}", "jeq %r1, {}, +0", "call {}"]),
    _NUMBER,
)
def test_fuzz_assembler_numbers(template: str, number: str) -> None:
    try:
        assemble(template.format(number) + "\nexit\n")
    except ParseError:
        pass


@settings(max_examples=3000, deadline=None)
@given(st.text(max_size=200))
def test_fuzz_assembler_text(text: str) -> None:
    try:
        assemble(text)
    except ParseError:
        pass

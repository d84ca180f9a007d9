"""Whether an instruction is a valid eBPF encoding, and if not, what is wrong.

One validator serves every layer: :func:`validate` raises a
:class:`~bpfmux.errors.ParseError` (assembler, builder, strict decoding,
disassembler), the emulator's VM and verifier read the :class:`Flaw` objects
:func:`flaws` yields and word them their own way (the VM faults the
instruction, the verifier answers with the kernel's message and errno).

Validity follows RFC 9669 plus the kernel's extensions up to ISA v4 and later
(``may_goto``, ``addr_space_cast``, load-acquire/store-release): a known
opcode, registers r0-r10, every field the encoding does not use set to zero,
and the operation-selecting fields (``off`` of ``sdiv``/``smod``/``movsx``,
``imm`` of byte swaps and atomics, ``src`` of calls and ``lddw``) holding a
defined value. Whether an instruction may *run* (writes to r10, helpers a
program type may call, …) is not this module's question.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Sequence

from ..errors import ParseError
from ..record import Frozen
from ..record import set_field as _set
from .analysis import ATOMIC_RMW_OPS, MAX_REG, branch_targets, mnemonic
from .insn import Insn
from .opcodes import ADDR_SPACE_CAST, LDDW, MAY_GOTO, Alu, Atomic, CallKind, Class, Jmp, Mode, Pseudo, Size, Source

__all__ = ["Family", "Flaw", "FlawKind", "first_flaw", "flaws", "validate", "validate_program"]


class FlawKind(enum.Enum):
    """What sort of problem a :class:`Flaw` is."""

    #: A field does not fit its encoding (opcode above 8 bits, ``off`` above 16, …).
    RANGE = "range"
    #: A register field used as a register names r11-r15.
    REGISTER = "register"
    #: The opcode (class, operation, mode, size, source bit) is not defined.
    OPCODE = "opcode"
    #: A field that selects the operation holds an undefined value (byte-swap
    #: width, ``off`` of ``div``/``mod``/``mov``, atomic operation, access size
    #: of an atomic, call kind, ``lddw`` pseudo source, ``may_goto`` source).
    OPERAND = "operand"
    #: A field the operation does not use is not zero. The operation itself is
    #: well defined: an executor that ignores the field runs it.
    RESERVED = "reserved"


class Family(enum.Enum):
    """The group of instructions a flaw belongs to (the kernel's messages name these)."""

    ALU = "ALU"
    ALU64 = "ALU64"
    END = "END"
    NEG = "NEG"
    JMP = "JMP"  # conditional jumps, 64- and 32-bit
    JA = "JA"
    CALL = "CALL"
    EXIT = "EXIT"
    JCOND = "JCOND"
    LDDW = "LDDW"
    LD_LEGACY = "LD_ABS_IND"
    LDX = "LDX"
    ST = "ST"
    STX = "STX"
    ATOMIC = "ATOMIC"


class Flaw(Frozen):
    """One problem of one instruction.

    :ivar insn: the instruction.
    :ivar kind: what sort of problem.
    :ivar family: the group of instructions it belongs to.
    :ivar field: the offending field (``"dst"``, ``"src"``, ``"off"``,
        ``"imm"``, ``"imm2"`` (the second ``lddw`` slot's ``imm``), ``"size"``
        or ``"opcode"``).
    :ivar message: the problem in words, naming the instruction and the field.
    """

    __slots__ = ("insn", "kind", "family", "field", "message")

    insn: Insn
    kind: FlawKind
    family: Family
    field: str
    message: str

    def __init__(self, insn: Insn, kind: FlawKind, family: Family, field: str, message: str) -> None:
        _set(self, "insn", insn)
        _set(self, "kind", kind)
        _set(self, "family", family)
        _set(self, "field", field)
        _set(self, "message", message)

    def __str__(self) -> str:
        return self.message


def _family(insn: Insn) -> Family:
    op = insn.opcode
    cls = op & 0x07
    if cls in (Class.ALU, Class.ALU64):
        aop = op & 0xF0
        if aop == Alu.END:
            return Family.END
        if aop == Alu.NEG:
            return Family.NEG
        return Family.ALU64 if cls == Class.ALU64 else Family.ALU
    if cls in (Class.JMP, Class.JMP32):
        special: dict[int, Family] = {Jmp.JA: Family.JA, Jmp.CALL: Family.CALL, Jmp.EXIT: Family.EXIT,
                                      Jmp.JCOND: Family.JCOND}
        return special.get(op & 0xF0, Family.JMP)
    if cls == Class.LD:
        return Family.LDDW if op == LDDW else Family.LD_LEGACY
    if cls == Class.LDX:
        return Family.LDX
    if cls == Class.ST:
        return Family.ST
    return Family.ATOMIC if op & 0xE0 == Mode.ATOMIC else Family.STX


def _flaw(insn: Insn, kind: FlawKind, field: str, what: str) -> Flaw:
    return Flaw(insn, kind, _family(insn), field, f"{mnemonic(insn)} ({insn.opcode:#04x}): {what}")


def _zero(insn: Insn, *fields: str) -> Iterator[Flaw]:
    for name in fields:
        value = getattr(insn, name)
        if value:
            yield _flaw(insn, FlawKind.RESERVED, name, f"reserved field {name}={value} must be 0")


def _src_reg(insn: Insn) -> Iterator[Flaw]:
    if insn.src > MAX_REG:
        yield _flaw(insn, FlawKind.REGISTER, "src", f"src register r{insn.src} does not exist (r0-r10)")


def flaws(insn: Insn) -> Iterator[Flaw]:
    """The problems of ``insn``, most fundamental first; nothing for a valid instruction.

    After a flaw of any kind but :attr:`FlawKind.RESERVED` nothing more is
    said (the rest of the instruction has no defined meaning); after a
    reserved field the remaining checks go on.
    """
    op = insn.opcode
    if not 0 <= op <= 0xFF:
        yield Flaw(insn, FlawKind.RANGE, _family(insn), "opcode", f"opcode {op} does not fit 8 bits")
        return
    if not 0 <= insn.dst <= MAX_REG:
        yield _flaw(insn, FlawKind.REGISTER, "dst", f"dst register r{insn.dst} does not exist (r0-r10)")
        return
    if not 0 <= insn.src <= 15:
        yield _flaw(insn, FlawKind.RANGE, "src", f"src field {insn.src} does not fit 4 bits")
        return
    if not -(1 << 15) <= insn.off < (1 << 15):
        yield _flaw(insn, FlawKind.RANGE, "off", f"offset {insn.off} does not fit 16 bits")
        return
    if op == LDDW:
        yield from _lddw(insn)
        return
    if not -(1 << 31) <= insn.imm < (1 << 31):
        yield _flaw(insn, FlawKind.RANGE, "imm", f"immediate {insn.imm} does not fit signed 32 bits")
        return
    cls = op & 0x07
    if cls in (Class.ALU, Class.ALU64):
        checks = _alu(insn)
    elif cls in (Class.JMP, Class.JMP32):
        checks = _jmp(insn)
    else:
        checks = _mem(insn)
    for flaw in checks:
        yield flaw
        if flaw.kind is not FlawKind.RESERVED:
            return


def first_flaw(insn: Insn) -> Flaw | None:
    """The first of :func:`flaws`, or ``None`` for a valid instruction."""
    return next(flaws(insn), None)


def validate(insn: Insn) -> None:
    """Check that ``insn`` is a valid eBPF instruction (see the module docstring).

    :raises ParseError: the message names the instruction and the bad field.
    """
    flaw = next(flaws(insn), None)
    if flaw is not None:
        raise ParseError(flaw.message)


def validate_program(insns: Sequence[Insn], *, targets: bool = True, source: str | None = None) -> None:
    """Validate every instruction and (``targets``) every jump/call target of a program.

    Checks each instruction with :func:`validate` and that every jump, ``ja32``,
    ``may_goto``, bpf-to-bpf call and function load lands on an instruction
    start inside the program. (Semantic checks such as "the last instruction
    must be an exit" belong to the verifier.)

    :param targets: also check the jump and call targets (off for a strict
        decode, which checks instructions one by one).
    :param source: names the input in the error (see :class:`ParseError`).
    :raises ParseError: the message names the slot, the instruction and the problem.
    """
    pos = 0
    for insn in insns:
        flaw = next(flaws(insn), None)
        if flaw is not None:
            raise ParseError(f"slot {pos}: {flaw.message}", pos * 8, source)
        pos += insn.size
    if targets:
        branch_targets(insns)


def _lddw(insn: Insn) -> Iterator[Flaw]:
    if not -(1 << 63) <= insn.imm < (1 << 64):
        yield _flaw(insn, FlawKind.RANGE, "imm", f"immediate {insn.imm} does not fit 64 bits")
        return
    if insn.src not in Pseudo._value2member_map_:
        yield _flaw(insn, FlawKind.OPERAND, "src", f"unknown pseudo source {insn.src} (0-6 are defined)")
        return
    yield from _zero(insn, "off")
    high = (insn.imm >> 32) & 0xFFFFFFFF
    if high and insn.src in (Pseudo.MAP_FD, Pseudo.MAP_IDX, Pseudo.FUNC):
        yield _flaw(
            insn,
            FlawKind.RESERVED,
            "imm2",
            f"reserved field imm of the second slot={high:#x} must be 0 for {Pseudo(insn.src).name}",
        )


def _alu(insn: Insn) -> Iterator[Flaw]:
    op = insn.opcode
    aop = op & 0xF0
    wide = op & 0x07 == Class.ALU64
    x = op & Source.X
    if aop not in Alu._value2member_map_:
        yield _flaw(insn, FlawKind.OPCODE, "opcode", f"unknown {'ALU64' if wide else 'ALU'} operation {aop:#04x}")
        return
    if aop == Alu.END:
        if wide and x:
            yield _flaw(insn, FlawKind.OPCODE, "opcode", "ALU64 | END | X is not defined (bswap uses the K form)")
            return
        if insn.imm not in (16, 32, 64):
            yield _flaw(insn, FlawKind.OPERAND, "imm", f"byte swap width imm={insn.imm} must be 16, 32 or 64")
            return
        yield from _zero(insn, "src", "off")
        return
    if aop == Alu.NEG:
        if x:
            yield _flaw(insn, FlawKind.OPCODE, "opcode", "neg has no register-source form (use the K form 0x84/0x87)")
            return
        yield from _zero(insn, "src", "off", "imm")
        return
    if aop in (Alu.DIV, Alu.MOD):
        if insn.off not in (0, 1):
            yield _flaw(insn, FlawKind.OPERAND, "off", f"off={insn.off} must be 0 (unsigned) or 1 (signed)")
            return
    elif aop == Alu.MOV and x:
        allowed = (0, 8, 16, 32, ADDR_SPACE_CAST) if wide else (0, 8, 16)
        if insn.off not in allowed:
            yield _flaw(
                insn,
                FlawKind.OPERAND,
                "off",
                f"off={insn.off} must be one of {', '.join(map(str, allowed))} (sign-extension width)",
            )
            return
        if wide and insn.off == ADDR_SPACE_CAST:
            if insn.imm not in (1, 1 << 16):
                yield _flaw(
                    insn,
                    FlawKind.OPERAND,
                    "imm",
                    f"off=1 means addr_space_cast, which needs imm 0x1 or 0x10000 (got {insn.imm:#x}); "
                    "a plain mov needs off=0",
                )
                return
            yield from _src_reg(insn)
            return
    else:
        yield from _zero(insn, "off")
    if x:
        yield from _src_reg(insn)
        yield from _zero(insn, "imm")
    else:
        yield from _zero(insn, "src")


def _jmp(insn: Insn) -> Iterator[Flaw]:
    op = insn.opcode
    jop = op & 0xF0
    j32 = op & 0x07 == Class.JMP32
    x = op & Source.X
    if jop not in Jmp._value2member_map_ or (j32 and jop in (Jmp.CALL, Jmp.EXIT, Jmp.JCOND)):
        yield _flaw(insn, FlawKind.OPCODE, "opcode", f"unknown {'JMP32' if j32 else 'JMP'} operation {jop:#04x}")
        return
    if jop == Jmp.JA:
        if x:
            yield _flaw(insn, FlawKind.OPCODE, "opcode", "ja has no register-source form")
            return
        yield from _zero(insn, "dst", "src", "off" if j32 else "imm")
        return
    if jop == Jmp.CALL:
        if x:
            yield from _zero(insn, "src", "off", "imm")
            return
        yield from _zero(insn, "dst")
        if insn.src not in CallKind._value2member_map_:
            yield _flaw(insn, FlawKind.OPERAND, "src", f"unknown call kind src={insn.src} (0 helper, 1 bpf-to-bpf, 2 kfunc)")
            return
        if insn.src != CallKind.KFUNC_CALL:
            yield from _zero(insn, "off")
        return
    if jop == Jmp.EXIT:
        if x:
            yield _flaw(insn, FlawKind.OPCODE, "opcode", "exit has no register-source form")
            return
        yield from _zero(insn, "dst", "src", "off", "imm")
        return
    if jop == Jmp.JCOND:
        if x:
            yield _flaw(insn, FlawKind.OPCODE, "opcode", "may_goto has no register-source form")
            return
        if insn.src != MAY_GOTO:
            yield _flaw(insn, FlawKind.OPERAND, "src", f"unknown conditional pseudo-jump src={insn.src} (0 is may_goto)")
            return
        yield from _zero(insn, "dst", "imm")
        return
    if x:
        yield from _src_reg(insn)
        yield from _zero(insn, "imm")
    else:
        yield from _zero(insn, "src")


def _mem(insn: Insn) -> Iterator[Flaw]:
    op = insn.opcode
    cls = op & 0x07
    mode = op & 0xE0
    size = op & 0x18
    if cls == Class.LD:
        if mode not in (Mode.ABS, Mode.IND) or size == Size.DW:
            yield _flaw(
                insn,
                FlawKind.OPCODE,
                "opcode",
                "unknown LD instruction (only lddw and the legacy ABS/IND loads of 1, 2, 4 bytes exist)",
            )
            return
        if mode == Mode.ABS:
            yield from _zero(insn, "dst", "src", "off")
        else:
            yield from _src_reg(insn)
            yield from _zero(insn, "dst", "off")
        return
    if cls == Class.LDX:
        if mode not in (Mode.MEM, Mode.MEMSX) or (mode == Mode.MEMSX and size == Size.DW):
            yield _flaw(insn, FlawKind.OPCODE, "opcode", "unknown LDX instruction (MEM of 1-8 bytes or MEMSX of 1-4 bytes)")
            return
        yield from _src_reg(insn)
        yield from _zero(insn, "imm")
        return
    if cls == Class.ST:
        if mode != Mode.MEM:
            yield _flaw(insn, FlawKind.OPCODE, "opcode", "unknown ST instruction (only MEM mode exists)")
            return
        yield from _zero(insn, "src")
        return
    # STX
    if mode == Mode.MEM:
        yield from _src_reg(insn)
        yield from _zero(insn, "imm")
        return
    if mode != Mode.ATOMIC:
        yield _flaw(insn, FlawKind.OPCODE, "opcode", "unknown STX instruction (MEM or ATOMIC mode)")
        return
    yield from _src_reg(insn)
    if insn.imm in (Atomic.LOAD_ACQ, Atomic.STORE_REL):
        return
    if size not in (Size.W, Size.DW):
        yield _flaw(insn, FlawKind.OPERAND, "size", "read-modify-write atomics exist only for 4 and 8 bytes")
        return
    if insn.imm in (Atomic.XCHG, Atomic.CMPXCHG) or insn.imm & ~Atomic.FETCH in ATOMIC_RMW_OPS:
        return
    yield _flaw(insn, FlawKind.OPERAND, "imm", f"unknown atomic operation imm={insn.imm:#x}")

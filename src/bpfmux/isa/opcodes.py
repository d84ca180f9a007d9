"""eBPF opcode fields (RFC 9669): classes, sizes, modes, ALU and jump ops."""

from __future__ import annotations

import enum


class Class(enum.IntEnum):
    """Instruction class, the low 3 bits of the opcode."""

    LD = 0x00
    LDX = 0x01
    ST = 0x02
    STX = 0x03
    ALU = 0x04
    JMP = 0x05
    JMP32 = 0x06
    ALU64 = 0x07


class Size(enum.IntEnum):
    """Memory access size (bits 3-4 of load/store opcodes)."""

    W = 0x00
    H = 0x08
    B = 0x10
    DW = 0x18


SIZE_BYTES: dict[int, int] = {Size.W: 4, Size.H: 2, Size.B: 1, Size.DW: 8}


class Mode(enum.IntEnum):
    """Memory access mode (bits 5-7 of load/store opcodes)."""

    IMM = 0x00
    ABS = 0x20
    IND = 0x40
    MEM = 0x60
    MEMSX = 0x80
    ATOMIC = 0xC0


class Source(enum.IntEnum):
    """Operand source (bit 3 of ALU/JMP opcodes)."""

    K = 0x00
    X = 0x08


class Alu(enum.IntEnum):
    """ALU operation (bits 4-7)."""

    ADD = 0x00
    SUB = 0x10
    MUL = 0x20
    DIV = 0x30
    OR = 0x40
    AND = 0x50
    LSH = 0x60
    RSH = 0x70
    NEG = 0x80
    MOD = 0x90
    XOR = 0xA0
    MOV = 0xB0
    ARSH = 0xC0
    END = 0xD0


class Jmp(enum.IntEnum):
    """Jump operation (bits 4-7)."""

    JA = 0x00
    JEQ = 0x10
    JGT = 0x20
    JGE = 0x30
    JSET = 0x40
    JNE = 0x50
    JSGT = 0x60
    JSGE = 0x70
    CALL = 0x80
    EXIT = 0x90
    JLT = 0xA0
    JLE = 0xB0
    JSLT = 0xC0
    JSLE = 0xD0
    JCOND = 0xE0  # conditional pseudo-jump (``may_goto``), JMP class only


class Atomic(enum.IntEnum):
    """Atomic operation, in the ``imm`` field of ``STX | ATOMIC``."""

    ADD = 0x00
    OR = 0x40
    AND = 0x50
    XOR = 0xA0
    FETCH = 0x01
    XCHG = 0xE0 | 0x01
    CMPXCHG = 0xF0 | 0x01
    LOAD_ACQ = 0x100  # load-acquire (``dst = *(src + off)``), any size
    STORE_REL = 0x110  # store-release (``*(dst + off) = src``), any size


class Endian(enum.IntEnum):
    """Byte-order target of ``ALU | END`` (the source bit); ``ALU64 | END`` is ``bswap``."""

    TO_LE = 0x00
    TO_BE = 0x08


class Pseudo(enum.IntEnum):
    """``src_reg`` values of ``lddw`` (``BPF_LD | BPF_IMM | BPF_DW``)."""

    NONE = 0
    MAP_FD = 1
    MAP_VALUE = 2
    BTF_ID = 3
    FUNC = 4
    MAP_IDX = 5
    MAP_IDX_VALUE = 6


class CallKind(enum.IntEnum):
    """``src_reg`` values of ``call``."""

    HELPER = 0
    PSEUDO_CALL = 1  # bpf-to-bpf call, imm = relative insn offset
    KFUNC_CALL = 2


#: Opcode of the 16-byte ``lddw`` instruction.
LDDW = Class.LD | Size.DW | Mode.IMM

#: ``BPF_JCOND`` ``src_reg`` value of ``may_goto``.
MAY_GOTO = 0
#: ``off`` of ``ALU64 | MOV | X`` that makes it ``addr_space_cast``.
ADDR_SPACE_CAST = 1

# Whole opcodes that analysis code compares against often.
JA = Class.JMP | Jmp.JA  #: ``goto +off``
JA32 = Class.JMP32 | Jmp.JA  #: ``gotol +imm`` (``ja32``)
CALL = Class.JMP | Jmp.CALL | Source.K  #: helper, bpf-to-bpf or kfunc call
CALLX = Class.JMP | Jmp.CALL | Source.X  #: indirect call through ``dst``
EXIT = Class.JMP | Jmp.EXIT  #: return ``r0``
MAY_GOTO_OP = Class.JMP | Jmp.JCOND  #: ``may_goto +off``

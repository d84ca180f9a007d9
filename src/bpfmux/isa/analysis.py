"""Classifying and navigating eBPF instructions.

The VM, the verifier and the object loader all need the same questions
answered about an :class:`~bpfmux.isa.insn.Insn`: is it a jump and where to,
is it a helper call and which one, what is it called. This module answers
them, once. Whether an encoding is valid at all is :mod:`bpfmux.isa.validity`'s
question; which registers an instruction reads and writes, and the control
flow and liveness of a function, :mod:`bpfmux.isa.flow`'s.

Offsets are counted in *slots* (8-byte units; ``lddw`` takes two), as the
kernel counts them. :func:`slot_index` maps slots back to list indices.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import ParseError
from .insn import Insn, slot_offsets
from .opcodes import (
    ADDR_SPACE_CAST,
    CALL,
    CALLX,
    EXIT,
    JA,
    JA32,
    LDDW,
    MAY_GOTO_OP,
    SIZE_BYTES,
    Alu,
    Atomic,
    CallKind,
    Class,
    Jmp,
    Mode,
    Pseudo,
    Size,
    Source,
)

__all__ = [
    "ATOMIC_RMW_OPS",
    "MAX_REG",
    "atomic_op",
    "branch_targets",
    "call_target",
    "helper_id",
    "is_alu",
    "is_atomic",
    "is_call",
    "is_callx",
    "is_cond_jump",
    "is_exit",
    "is_helper_call",
    "is_jump",
    "is_kfunc_call",
    "is_ld_func",
    "is_ld_map",
    "is_lddw",
    "is_legacy_load",
    "is_load",
    "is_may_goto",
    "is_pseudo_call",
    "is_signed_alu",
    "is_store",
    "is_uncond_jump",
    "jump_offset",
    "jump_target",
    "mem_size",
    "mnemonic",
    "pseudo",
    "slot_index",
    "subprogram_entries",
]

#: Highest register number (r10, the read-only frame pointer).
MAX_REG = 10

#: Read-modify-write atomic operations (``imm`` of ``STX | ATOMIC``), with
#: their conformance-syntax names. ``| FETCH`` may be added to the first four.
ATOMIC_RMW_OPS: dict[int, str] = {Atomic.ADD: "add", Atomic.OR: "or", Atomic.AND: "and", Atomic.XOR: "xor"}

_ALU_NAMES: dict[int, str] = {
    Alu.ADD: "add",
    Alu.SUB: "sub",
    Alu.MUL: "mul",
    Alu.DIV: "div",
    Alu.OR: "or",
    Alu.AND: "and",
    Alu.LSH: "lsh",
    Alu.RSH: "rsh",
    Alu.NEG: "neg",
    Alu.MOD: "mod",
    Alu.XOR: "xor",
    Alu.MOV: "mov",
    Alu.ARSH: "arsh",
    Alu.END: "end",
}
_JMP_NAMES: dict[int, str] = {
    Jmp.JA: "ja",
    Jmp.JEQ: "jeq",
    Jmp.JGT: "jgt",
    Jmp.JGE: "jge",
    Jmp.JSET: "jset",
    Jmp.JNE: "jne",
    Jmp.JSGT: "jsgt",
    Jmp.JSGE: "jsge",
    Jmp.CALL: "call",
    Jmp.EXIT: "exit",
    Jmp.JLT: "jlt",
    Jmp.JLE: "jle",
    Jmp.JSLT: "jslt",
    Jmp.JSLE: "jsle",
    Jmp.JCOND: "may_goto",
}
_SIZE_SUFFIX = {Size.B: "b", Size.H: "h", Size.W: "w", Size.DW: "dw"}
_COND_JMPS = frozenset(
    {Jmp.JEQ, Jmp.JGT, Jmp.JGE, Jmp.JSET, Jmp.JNE, Jmp.JSGT, Jmp.JSGE, Jmp.JLT, Jmp.JLE, Jmp.JSLT, Jmp.JSLE}
)


# --------------------------------------------------------------------------- classes


def is_lddw(insn: Insn) -> bool:
    """``lddw`` (``LD | IMM | DW``), the two-slot 64-bit immediate load."""
    return insn.opcode == LDDW


def is_alu(insn: Insn) -> bool:
    """An ``ALU`` or ``ALU64`` class instruction (includes ``mov``, ``neg``, byte swaps)."""
    return insn.opcode & 0x07 in (Class.ALU, Class.ALU64)


def is_signed_alu(insn: Insn) -> bool:
    """``sdiv``/``smod`` (ISA v4: ``DIV``/``MOD`` with ``off == 1``)."""
    return is_alu(insn) and insn.opcode & 0xF0 in (Alu.DIV, Alu.MOD) and insn.off == 1


def is_jump(insn: Insn) -> bool:
    """A branch: ``ja``, ``ja32``, ``may_goto`` or a conditional jump (not ``call``/``exit``)."""
    cls = insn.opcode & 0x07
    if cls not in (Class.JMP, Class.JMP32):
        return False
    op = insn.opcode & 0xF0
    if op in (Jmp.CALL, Jmp.EXIT):
        return False
    return cls == Class.JMP or op != Jmp.JCOND


def is_cond_jump(insn: Insn) -> bool:
    """A conditional jump comparing registers (``jeq`` … ``jsle``, 64- or 32-bit)."""
    return insn.opcode & 0x07 in (Class.JMP, Class.JMP32) and insn.opcode & 0xF0 in _COND_JMPS


def is_uncond_jump(insn: Insn) -> bool:
    """``ja`` (``goto +off``) or ``ja32`` (``gotol +imm``)."""
    return insn.opcode in (JA, JA32)


def is_may_goto(insn: Insn) -> bool:
    """``may_goto`` (``JMP | JCOND``): falls through until the loop budget runs out, then jumps."""
    return insn.opcode == MAY_GOTO_OP


def is_exit(insn: Insn) -> bool:
    """``exit``."""
    return insn.opcode == EXIT


def is_call(insn: Insn) -> bool:
    """Any call: helper, bpf-to-bpf (pseudo), kfunc, or ``callx``."""
    return insn.opcode in (CALL, CALLX)


def is_callx(insn: Insn) -> bool:
    """``callx``: call through a register."""
    return insn.opcode == CALLX


def is_helper_call(insn: Insn) -> bool:
    """A call of a helper by its static id (``src == 0``)."""
    return insn.opcode == CALL and insn.src == CallKind.HELPER


def is_pseudo_call(insn: Insn) -> bool:
    """A bpf-to-bpf call (``src == 1``, ``imm`` = slot offset of the callee)."""
    return insn.opcode == CALL and insn.src == CallKind.PSEUDO_CALL


def is_kfunc_call(insn: Insn) -> bool:
    """A kfunc call (``src == 2``, ``imm`` = BTF id, ``off`` = module BTF fd index)."""
    return insn.opcode == CALL and insn.src == CallKind.KFUNC_CALL


def helper_id(insn: Insn) -> int | None:
    """The helper id of a helper call, else ``None``."""
    return insn.imm if is_helper_call(insn) else None


def is_load(insn: Insn) -> bool:
    """A memory load into ``dst``: ``LDX | MEM`` or ``LDX | MEMSX`` (sign-extending)."""
    return insn.opcode & 0x07 == Class.LDX and insn.opcode & 0xE0 in (Mode.MEM, Mode.MEMSX)


def is_store(insn: Insn) -> bool:
    """A plain memory store: ``ST | MEM`` (immediate) or ``STX | MEM`` (register)."""
    return insn.opcode & 0x07 in (Class.ST, Class.STX) and insn.opcode & 0xE0 == Mode.MEM


def is_atomic(insn: Insn) -> bool:
    """``STX | ATOMIC``: read-modify-write, ``xchg``, ``cmpxchg``, load-acquire, store-release."""
    return insn.opcode & 0x07 == Class.STX and insn.opcode & 0xE0 == Mode.ATOMIC


def atomic_op(insn: Insn) -> Atomic | None:
    """The atomic operation of ``STX | ATOMIC`` without the fetch bit, or ``None``.

    ``XCHG``, ``CMPXCHG``, ``LOAD_ACQ`` and ``STORE_REL`` are returned as they
    are; for the read-modify-write operations check ``insn.imm & Atomic.FETCH``.
    """
    if not is_atomic(insn):
        return None
    if insn.imm in (Atomic.XCHG, Atomic.CMPXCHG, Atomic.LOAD_ACQ, Atomic.STORE_REL):
        return Atomic(insn.imm)
    try:
        return Atomic(insn.imm & ~Atomic.FETCH)
    except ValueError:
        return None


def is_legacy_load(insn: Insn) -> bool:
    """The legacy packet loads ``LD | ABS`` and ``LD | IND`` (socket filters only)."""
    return insn.opcode & 0x07 == Class.LD and insn.opcode & 0xE0 in (Mode.ABS, Mode.IND)


def mem_size(insn: Insn) -> int:
    """Access width in bytes of a load, store, atomic or legacy load.

    :raises ParseError: the instruction does not access memory.
    """
    cls = insn.opcode & 0x07
    if cls in (Class.LD, Class.LDX, Class.ST, Class.STX) and insn.opcode != LDDW:
        return SIZE_BYTES[Size(insn.opcode & 0x18)]
    raise ParseError(f"{mnemonic(insn)} ({insn.opcode:#04x}) does not access memory")


def pseudo(insn: Insn) -> Pseudo | None:
    """The pseudo kind of an ``lddw`` (``Pseudo.NONE`` for a plain constant), else ``None``."""
    if insn.opcode != LDDW:
        return None
    try:
        return Pseudo(insn.src)
    except ValueError:
        return None


def is_ld_map(insn: Insn) -> bool:
    """``lddw`` of a map reference (fd, index, or a value address in either)."""
    return insn.opcode == LDDW and insn.src in (
        Pseudo.MAP_FD,
        Pseudo.MAP_VALUE,
        Pseudo.MAP_IDX,
        Pseudo.MAP_IDX_VALUE,
    )


def is_ld_func(insn: Insn) -> bool:
    """``lddw`` of a bpf-to-bpf function address (``src == 4``, ``imm`` = slot offset)."""
    return insn.opcode == LDDW and insn.src == Pseudo.FUNC


# --------------------------------------------------------------------------- targets


def jump_offset(insn: Insn) -> int:
    """The branch offset in slots (``imm`` for ``ja32``, else ``off``).

    :raises ParseError: the instruction is not a jump.
    """
    if insn.opcode == JA32:
        return insn.imm
    if is_jump(insn):
        return insn.off
    raise ParseError(f"{mnemonic(insn)} ({insn.opcode:#04x}) is not a jump")


def jump_target(insn: Insn, slot: int) -> int:
    """Slot a jump at ``slot`` branches to (``slot + 1 + offset``).

    :raises ParseError: the instruction is not a jump.
    """
    return slot + 1 + jump_offset(insn)


def call_target(insn: Insn, slot: int) -> int:
    """Slot of the callee of a bpf-to-bpf call, or of the function an ``lddw`` func loads.

    :raises ParseError: the instruction is neither a pseudo call nor an ``lddw`` of a function.
    """
    if is_pseudo_call(insn):
        return slot + 1 + insn.imm
    if is_ld_func(insn):
        low = insn.imm & 0xFFFFFFFF
        return slot + 1 + (low - (1 << 32) if low & 0x80000000 else low)
    raise ParseError(f"{mnemonic(insn)} ({insn.opcode:#04x}) is not a bpf-to-bpf call or function load")


def slot_index(insns: Sequence[Insn]) -> dict[int, int]:
    """Map from slot number to list index for each instruction start."""
    return {slot: i for i, slot in enumerate(slot_offsets(insns))}


def branch_targets(insns: Sequence[Insn]) -> list[int | None]:
    """For each instruction the list index it may jump or call to, else ``None``.

    Jumps give their branch target, pseudo calls and function loads their
    callee. Fall-through is not included.

    :raises ParseError: a target is outside the program or inside an ``lddw``.
    """
    index = slot_index(insns)
    out: list[int | None] = []
    pos = 0
    for insn in insns:
        target: int | None = None
        if is_jump(insn):
            target = jump_target(insn, pos)
        elif is_pseudo_call(insn) or is_ld_func(insn):
            target = call_target(insn, pos)
        if target is None:
            out.append(None)
        else:
            if target not in index:
                raise ParseError(_bad_target(insn, pos, target, sum(i.size for i in insns)), pos * 8)
            out.append(index[target])
        pos += insn.size
    return out


def _bad_target(insn: Insn, pos: int, target: int, total: int) -> str:
    where = "into the middle of an lddw" if 0 <= target < total else f"outside the program ({total} slots)"
    return f"slot {pos}: {mnemonic(insn)} targets slot {target}, {where}; fix the offset or label"


def subprogram_entries(insns: Sequence[Insn]) -> list[int]:
    """Sorted list indices where subprograms start: 0 and every bpf-to-bpf call or function-load target.

    :raises ParseError: a call target is outside the program or inside an ``lddw``.
    """
    index = slot_index(insns)
    entries = {0} if insns else set()
    pos = 0
    for insn in insns:
        if is_pseudo_call(insn) or is_ld_func(insn):
            target = call_target(insn, pos)
            if target not in index:
                raise ParseError(_bad_target(insn, pos, target, sum(i.size for i in insns)), pos * 8)
            entries.add(index[target])
        pos += insn.size
    return sorted(entries)


# --------------------------------------------------------------------------- names


def mnemonic(insn: Insn) -> str:
    """Short name of the instruction in the conformance assembler's vocabulary.

    Examples: ``add32``, ``sdiv``, ``movsx832`` (sign-extend 8 bits into a
    32-bit register), ``ldxsh``, ``jeq32``, ``lock fetch add``, ``lddw``,
    ``call``. Never raises; an unknown encoding is named ``op 0xNN``.
    """
    op = insn.opcode
    cls = op & 0x07
    unknown = f"op {op:#04x}"
    if cls in (Class.ALU, Class.ALU64):
        aop = op & 0xF0
        name = _ALU_NAMES.get(aop)
        if name is None:
            return unknown
        wide = cls == Class.ALU64
        if aop == Alu.END:
            if wide:
                return f"bswap{insn.imm}"
            return f"{'be' if op & Source.X else 'le'}{insn.imm}"
        if aop in (Alu.DIV, Alu.MOD) and insn.off == 1:
            name = "s" + name
        if aop == Alu.MOV and op & Source.X:
            if wide and insn.off == ADDR_SPACE_CAST:
                return "addr_space_cast"
            if insn.off in (8, 16, 32):
                return f"movsx{insn.off}{64 if wide else 32}"
        return name if wide else name + "32"
    if cls in (Class.JMP, Class.JMP32):
        jop = op & 0xF0
        name = _JMP_NAMES.get(jop)
        if name is None:
            return unknown
        if op == CALLX:
            return "callx"
        return name + "32" if cls == Class.JMP32 else name
    size = _SIZE_SUFFIX[Size(op & 0x18)]
    mode = op & 0xE0
    if cls == Class.LD:
        if op == LDDW:
            return "lddw"
        if mode == Mode.ABS:
            return "ldabs" + size
        if mode == Mode.IND:
            return "ldind" + size
        return unknown
    if cls == Class.LDX:
        if mode == Mode.MEM:
            return "ldx" + size
        if mode == Mode.MEMSX:
            return "ldxs" + size
        return unknown
    if cls == Class.ST:
        return "st" + size if mode == Mode.MEM else unknown
    if mode == Mode.MEM:
        return "stx" + size
    if mode != Mode.ATOMIC:
        return unknown
    suffix = "" if op & 0x18 == Size.DW else "32"
    if insn.imm == Atomic.LOAD_ACQ:
        return "ldacq" + size
    if insn.imm == Atomic.STORE_REL:
        return "strel" + size
    if insn.imm == Atomic.XCHG:
        return "lock xchg" + suffix
    if insn.imm == Atomic.CMPXCHG:
        return "lock cmpxchg" + suffix
    base = ATOMIC_RMW_OPS.get(insn.imm & ~Atomic.FETCH)
    if base is None:
        return "lock ?"
    return ("lock fetch " if insn.imm & Atomic.FETCH else "lock ") + base + suffix

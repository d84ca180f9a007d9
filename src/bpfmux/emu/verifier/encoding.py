"""The kernel's words for encoding problems it finds on explored instructions.

The kernel checks most fields of an instruction only when it explores it
(an instruction on a path no value can take is never checked); which
fields it checks, in which order, and how it says so differ by instruction
group. :func:`reserved_error` asks :mod:`bpfmux.isa.validity` (the one
instruction validator) what is wrong and answers with the kernel's message
for the group, leaving out what the kernel does not check (the ``off`` of
``exit``). Registers r11-r15 are reported separately, when the kernel reads
or writes them ("R12 is invalid").
"""

from __future__ import annotations

import functools

from ...isa.analysis import ATOMIC_RMW_OPS
from ...isa.insn import Insn, canonical
from ...isa.opcodes import ADDR_SPACE_CAST, Alu, Atomic, Class, Jmp, Mode, Size
from ...isa.validity import Family, FlawKind, flaws

__all__ = ["reserved_error"]

_GROUP = {
    Family.ALU: "BPF_ALU", Family.ALU64: "BPF_ALU", Family.END: "BPF_END", Family.NEG: "BPF_NEG",
    Family.JMP: "BPF_JMP/JMP32", Family.JA: "BPF_JA", Family.CALL: "BPF_CALL", Family.EXIT: "BPF_EXIT",
    Family.LD_LEGACY: "BPF_LD_[ABS|IND]", Family.LDX: "BPF_LDX", Family.ST: "BPF_ST", Family.STX: "BPF_STX",
    Family.LDDW: "BPF_LD_IMM64",
}
_ATOMIC_OPS = frozenset(ATOMIC_RMW_OPS) | {op | Atomic.FETCH for op in ATOMIC_RMW_OPS} | {
    Atomic.XCHG, Atomic.CMPXCHG, Atomic.LOAD_ACQ, Atomic.STORE_REL}


def _as_valid_regs(insn: Insn) -> Insn:
    """The instruction with registers r11-r15 replaced by r10 (so that the
    validator judges the other fields; a non-zero register stays non-zero)."""
    if insn.dst > 10 or insn.src > 10:
        return insn.replace(dst=min(insn.dst, 10), src=min(insn.src, 10))
    return insn


@functools.lru_cache(maxsize=1 << 14)
def reserved_error(insn: Insn) -> str | None:
    """The kernel's message (all are ``EINVAL``) for a field of an explored
    instruction that its group does not allow, or ``None``."""
    insn = canonical(insn)
    op = insn.opcode
    cls = op & 7
    if op == (Class.JMP | Jmp.JCOND):
        if insn.src != 0 or insn.dst or insn.imm:  # an offset of 0 is allowed (a no-op)
            return f"invalid may_goto imm {insn.imm}"
        return None
    if cls == Class.STX and op & 0xE0 == Mode.ATOMIC:
        if insn.imm not in _ATOMIC_OPS:
            return f"BPF_ATOMIC uses invalid atomic opcode {insn.imm & 0xFFFFFFFF:02x}"
        if insn.imm not in (Atomic.LOAD_ACQ, Atomic.STORE_REL) and op & 0x18 not in (Size.W, Size.DW):
            return "invalid atomic operand size"
        return None
    if cls == Class.ALU64 and op & 0xF0 == Alu.MOV and op & 0x08 and insn.off == ADDR_SPACE_CAST:
        if insn.imm not in (1, 1 << 16):
            return "addr_space_cast insn can only convert between address space 1 and 0"
        return "addr_space_cast insn can only be used in a program that has an associated arena"
    for flaw in flaws(_as_valid_regs(insn)):
        if flaw.kind is FlawKind.REGISTER:
            continue
        if flaw.family is Family.EXIT and flaw.field == "off":
            continue
        if flaw.family in (Family.ALU, Family.ALU64) and op & 0xF0 == Alu.MOV:
            return "BPF_MOV uses reserved fields"
        group = _GROUP.get(flaw.family)
        if group is None:
            return f"unknown opcode {op:02x}"
        return f"{group} uses reserved fields"
    return None

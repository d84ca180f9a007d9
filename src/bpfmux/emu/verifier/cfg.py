"""Structural checks of the emulator's verifier: opcodes, jumps, subprograms,
reachability, prune points and register liveness.

Everything here looks at the instruction list only (no abstract values).
Encodings are judged by :mod:`bpfmux.isa.validity` and liveness computed by
:mod:`bpfmux.isa.flow`; this module words their findings the kernel's way.
Failures raise :class:`Reject` with the kernel's wording and errno
(``EINVAL`` for malformed programs).
"""

from __future__ import annotations

import errno
from dataclasses import dataclass, field

from ...isa.analysis import call_target, is_atomic, is_helper_call, is_jump, is_ld_func, is_pseudo_call, jump_target
from ...isa.flow import CFG, by_slot, live_in, regs_read, regs_written
from ...isa.insn import Insn, canonical, slot_offsets
from ...isa.opcodes import ADDR_SPACE_CAST, CALLX, LDDW, Alu, Atomic, Class, Jmp, Size
from ...isa.validity import Family, Flaw, FlawKind, flaws
from .helpers import PROTOS


class Reject(Exception):
    """Internal: the program is rejected (turned into ``VerifierError`` by ``verify``)."""

    def __init__(self, err: int, msg: str, insn: int | None = None) -> None:
        super().__init__(msg)
        self.errno = err
        self.msg = msg
        self.insn = insn


@dataclass
class Cfg:
    """The structure of a program, as the verifier needs it."""

    insns: list[Insn]
    slots: list[int]
    slot_to_idx: dict[int, int]
    targets: list[int]  # jump / call / func-pointer target index, -1 if none
    subprogs: list[int]  # start index of each subprogram
    subprog_of: list[int]
    prune: list[bool]
    live: list[int] = field(default_factory=list)  # live-in registers bitmask per insn
    has_loops: bool = False


#: The kernel's name of each group of instructions in "... uses reserved fields".
_GROUP = {
    Family.ALU: "BPF_ALU", Family.ALU64: "BPF_ALU64", Family.END: "BPF_END", Family.NEG: "BPF_NEG",
    Family.JMP: "BPF_JMP/JMP32", Family.JCOND: "BPF_JMP/JMP32", Family.JA: "BPF_JA", Family.CALL: "BPF_CALL",
    Family.EXIT: "BPF_EXIT", Family.LD_LEGACY: "BPF_LD_[ABS|IND]", Family.LDX: "BPF_LDX", Family.ST: "BPF_ST",
    Family.STX: "BPF_STX", Family.ATOMIC: "BPF_ATOMIC",
}


def _kernel_message(flaw: Flaw) -> str:
    """The kernel's words for an encoding problem found by :func:`bpfmux.isa.validity.flaws`."""
    insn = flaw.insn
    if flaw.field in ("dst", "src") and flaw.kind in (FlawKind.REGISTER, FlawKind.RANGE):
        return f"R{getattr(insn, flaw.field)} is invalid"
    if flaw.kind is FlawKind.OPCODE or flaw.field == "opcode":
        return f"unknown opcode {insn.opcode:02x}"
    if flaw.family is Family.LDDW:
        return "invalid bpf_ld_imm64 insn"
    if flaw.family is Family.ATOMIC and flaw.field == "size":
        return "invalid atomic operand size"
    if flaw.family is Family.ATOMIC and flaw.field == "imm":
        return f"BPF_ATOMIC uses invalid atomic opcode {insn.imm:02x}"
    return f"{_GROUP[flaw.family]} uses reserved fields"


def _validate(insn: Insn, slot: int) -> None:
    """Reject an invalid encoding, and the valid ones the kernel refuses on sight or this verifier does not model."""
    found = list(flaws(canonical(insn)))
    if found:
        # a register that does not exist is named first, whatever else is wrong
        flaw = next((f for f in found if f.kind is FlawKind.REGISTER), found[0])
        raise Reject(errno.EINVAL, _kernel_message(flaw), slot)
    op, cls = insn.opcode, insn.opcode & 7
    if cls in (Class.ALU, Class.ALU64):
        aop = op & 0xF0
        if op & 0x08:
            if aop == Alu.MOV and insn.off == ADDR_SPACE_CAST:
                raise Reject(errno.EINVAL, "addr_space_cast insn can only be used in a program that has an "
                             "associated arena", slot)
        elif aop in (Alu.DIV, Alu.MOD) and insn.imm == 0:
            raise Reject(errno.EINVAL, "div by zero", slot)
        elif aop in (Alu.LSH, Alu.RSH, Alu.ARSH):
            bits = 64 if cls == Class.ALU64 else 32
            if not 0 <= insn.imm < bits:
                raise Reject(errno.EINVAL, f"invalid shift {insn.imm}", slot)
    elif op == CALLX:
        raise Reject(errno.EINVAL, "BPF_CALL uses reserved fields", slot)
    elif is_atomic(insn) and insn.imm in (Atomic.LOAD_ACQ, Atomic.STORE_REL):  # not modelled
        if op & 0x18 not in (Size.W, Size.DW):
            raise Reject(errno.EINVAL, "invalid atomic operand size", slot)
        raise Reject(errno.EINVAL, f"BPF_ATOMIC uses invalid atomic opcode {insn.imm:02x}", slot)


def _reads_writes(insn: Insn | None) -> tuple[frozenset[int], frozenset[int]]:
    """Registers an instruction reads and writes, calls of modelled helpers reading only their arguments."""
    if insn is None:
        return frozenset(), frozenset()
    proto = PROTOS.get(insn.imm) if is_helper_call(insn) else None
    nargs = 5 if proto is None else len(proto.args)
    return regs_read(insn, call_args=nargs), regs_written(insn)


def build_cfg(insns: list[Insn]) -> Cfg:
    """Check the program's structure and compute what the verifier needs.

    :raises Reject: a malformed or unreachable instruction, a bad jump.
    """
    n = len(insns)
    if n == 0:
        raise Reject(errno.EINVAL, "empty program")
    slots = slot_offsets(insns)
    nslots = slots[-1] + insns[-1].size
    if nslots > 1_000_000:
        raise Reject(errno.E2BIG, f"program has {nslots} instructions; the limit is 1000000")
    slot_to_idx = {s: i for i, s in enumerate(slots)}
    targets = [-1] * n
    sub_starts = {0}
    for i, insn in enumerate(insns):
        slot = slots[i]
        _validate(insn, slot)
        if is_pseudo_call(insn) or is_ld_func(insn):
            t = call_target(insn, slot)
            if t not in slot_to_idx:
                raise Reject(errno.EINVAL, "call to invalid destination" if is_pseudo_call(insn) else
                             "invalid func pointer destination", slot)
            targets[i] = slot_to_idx[t]
            sub_starts.add(targets[i])
        elif is_jump(insn):
            t = jump_target(insn, slot)
            if t < 0 or t >= nslots:
                raise Reject(errno.EINVAL, f"jump out of range from insn {slot} to {t}", slot)
            if t not in slot_to_idx:
                raise Reject(errno.EINVAL, f"jump into the middle of ldimm64 insn {t - 1}", slot)
            targets[i] = slot_to_idx[t]
    subprogs = sorted(sub_starts)
    subprog_of = [0] * n
    k = 0
    for i in range(n):
        while k + 1 < len(subprogs) and subprogs[k + 1] <= i:
            k += 1
        subprog_of[i] = k
    # last insn of each subprog; jumps stay inside their subprog
    for k, start in enumerate(subprogs):
        end = subprogs[k + 1] if k + 1 < len(subprogs) else n
        last = insns[end - 1]
        lop = last.opcode
        if not (lop & 7 in (Class.JMP, Class.JMP32) and lop & 0xF0 in (Jmp.EXIT, Jmp.JA)):
            raise Reject(errno.EINVAL, "last insn is not an exit or jmp", slots[end - 1])
        for i in range(start, end):
            t = targets[i]
            insn = insns[i]
            if t >= 0 and not (insn.opcode & 0xF0 == Jmp.CALL or insn.opcode == LDDW) and not start <= t < end:
                raise Reject(errno.EINVAL, f"jump out of range from insn {slots[i]} to {slots[t]}", slots[i])
    # reachability (DFS following jumps and calls), back-edges
    seen = bytearray(n)
    onstack = bytearray(n)
    has_loops = False
    prune = [False] * n
    work: list[tuple[int, int]] = [(0, 0)]
    # iterative DFS with explicit successor index to find back edges
    succs_cache: dict[int, list[int]] = {}

    def succs(i: int) -> list[int]:
        c = succs_cache.get(i)
        if c is not None:
            return c
        insn = insns[i]
        op, cls = insn.opcode, insn.opcode & 7
        out: list[int] = []
        if cls in (Class.JMP, Class.JMP32):
            jop = op & 0xF0
            if jop == Jmp.EXIT:
                out = []
            elif jop == Jmp.CALL:
                out = [i + 1] if i + 1 < n else []
                if insn.src == 1:
                    out.append(targets[i])
            elif jop == Jmp.JA:
                out = [targets[i]]
            else:
                out = [i + 1, targets[i]]
        else:
            out = [i + 1] if i + 1 < n else []
            if op == LDDW and insn.src == 4:
                out.append(targets[i])
        succs_cache[i] = out
        return out

    seen[0] = 1
    onstack[0] = 1
    while work:
        i, k = work[-1]
        ss = succs(i)
        if k < len(ss):
            work[-1] = (i, k + 1)
            j = ss[k]
            if j >= n:
                raise Reject(errno.EINVAL, f"jump out of range from insn {slots[i]} to {slots[-1] + 1}", slots[i])
            if onstack[j]:
                has_loops = True
                continue
            if not seen[j]:
                seen[j] = 1
                onstack[j] = 1
                work.append((j, 0))
        else:
            onstack[i] = 0
            work.pop()
    for i in range(n):
        if not seen[i]:
            raise Reject(errno.EINVAL, f"unreachable insn {slots[i]}", slots[i])
    # prune points: jump targets, both sides of conditional jumps, after calls
    for i, insn in enumerate(insns):
        op, cls = insn.opcode, insn.opcode & 7
        if cls in (Class.JMP, Class.JMP32):
            jop = op & 0xF0
            if jop == Jmp.EXIT:
                continue
            if jop == Jmp.CALL:
                if i + 1 < n:
                    prune[i + 1] = True
                continue
            prune[targets[i]] = True
            if jop != Jmp.JA and i + 1 < n:
                prune[i + 1] = True
    cfg = Cfg(insns, slots, slot_to_idx, targets, subprogs, subprog_of, prune, has_loops=has_loops)
    cfg.live = _liveness(cfg)
    return cfg


def _liveness(cfg: Cfg) -> list[int]:
    """Live-in registers (bit mask) of each instruction, function by function."""
    code = by_slot(cfg.insns)
    live = [0] * len(cfg.insns)
    for start in cfg.subprogs:
        for slot, regs in live_in(CFG(code, cfg.slots[start]), _reads_writes).items():
            mask = 0
            for r in regs:
                mask |= 1 << r
            live[cfg.slot_to_idx[slot]] = mask
    return live

"""Precision tracking: which scalars' exact values a decision depended on.

The verifier may prune a path when an explored state covers it. Scalars
whose exact value never mattered (never used as a pointer offset, a helper
size, a decided branch, …) need not match for that; the ones that did are
marked *precise* in the explored states, by walking the instructions of the
current path backwards (:func:`mark_precise`): a precise register makes the
registers and stack slots it was computed from precise too. This is the
kernel's backtracking (``__mark_chain_precision``) over the jump history
each state keeps; it decides how much the verifier prunes, and therefore
which loops converge and how many instructions are processed.

Jump history entries are ``[insn, previous insn, flags, linked]``: flags
say that the instruction spilled or filled a register to or from a stack
slot (``STACK_ACCESS`` with the slot and frame), or compared a stack
pointer (``SRC_STACK``/``DST_STACK``); ``linked`` lists registers that
learnt their range from the same comparison.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...isa.opcodes import LDDW, Class, Jmp, Mode
from .reg import T
from .state import Slot

if TYPE_CHECKING:
    from .state import VState

__all__ = ["DST_STACK", "SRC_STACK", "STACK_ACCESS", "Backtrack", "BacktrackBug", "mark_all_precise",
           "mark_precise"]

STACK_ACCESS = 1 << 3
SRC_STACK = 1 << 13
DST_STACK = 1 << 14
_SPI_SHIFT = 4  # flags: frame (bits 0-2), STACK_ACCESS, slot number (bits 4-9)
_ARGS = 0b111110  # r1-r5


class BacktrackBug(Exception):
    """Backtracking met something it cannot follow: fall back to marking every scalar precise."""


class Backtrack:
    """Registers and stack slots (per frame) still to be made precise."""

    __slots__ = ("frame", "regs", "slots")

    def __init__(self, frame: int) -> None:
        self.frame = frame
        self.regs = [0] * 8
        self.slots = [0] * 8

    def empty(self) -> bool:
        regs, slots = self.regs, self.slots
        for f in range(self.frame + 1):
            if regs[f] or slots[f]:
                return False
        return True

    def has(self, r: int) -> bool:
        return bool(self.regs[self.frame] >> r & 1)

    def set(self, r: int) -> None:
        self.regs[self.frame] |= 1 << r

    def clear(self, r: int) -> None:
        self.regs[self.frame] &= ~(1 << r)


def stack_flags(frame: int, slot: int) -> int:
    """History flags of an instruction spilling to or filling from ``slot`` of ``frame``."""
    return STACK_ACCESS | frame | (slot << _SPI_SHIFT)


def _sync_linked(bt: Backtrack, linked: list[tuple[int, int, bool]] | None) -> None:
    if not linked:
        return
    if not any((bt.regs[f] >> n & 1) if is_reg else (bt.slots[f] >> n & 1) for f, n, is_reg in linked):
        return
    for f, n, is_reg in linked:
        if is_reg:
            bt.regs[f] |= 1 << n
        else:
            bt.slots[f] |= 1 << n


def _backtrack_insn(v, idx: int, subseq: int, hist: list | None, bt: Backtrack) -> None:
    """Move ``bt`` from after instruction ``idx`` to before it."""
    insn = v.insns[idx]
    op = insn.opcode
    cls = op & 7
    d, s = insn.dst, insn.src
    if hist is not None:
        linked = hist[3]
        if linked:
            _sync_linked(bt, linked)
        flags = hist[2]
    else:
        linked = None
        flags = 0
    if cls == Class.ALU or cls == Class.ALU64:
        if not bt.regs[bt.frame] >> d & 1:
            return
        aop = op & 0xF0
        if aop == 0xD0 or aop == 0x80:  # END, NEG
            return
        if aop == 0xB0:  # MOV
            bt.clear(d)
            if op & 0x08 and s != 10:
                bt.set(s)
        elif op & 0x08 and s != 10:
            bt.set(s)
    elif cls == Class.LDX or (cls == Class.STX and op & 0xE0 == Mode.ATOMIC
                               and (insn.imm == 0x100 or (insn.imm & 1 and insn.imm < 0x100))):
        if cls == Class.LDX or insn.imm == 0x100:  # a load (load-acquire too)
            load = d
        else:  # the old value a fetching atomic writes back
            load = 0 if insn.imm == 0xF1 else s
        if not bt.has(load):
            return
        bt.clear(load)
        if not flags & STACK_ACCESS:
            return
        spi = (flags >> _SPI_SHIFT) & 0x3F
        bt.slots[flags & 7] |= 1 << spi
    elif cls == Class.STX or cls == Class.ST:
        if bt.has(d):
            raise BacktrackBug("store through a precise scalar")
        if not flags & STACK_ACCESS:
            return
        spi = (flags >> _SPI_SHIFT) & 0x3F
        fr = flags & 7
        if not bt.slots[fr] >> spi & 1:
            return
        bt.slots[fr] &= ~(1 << spi)
        if cls == Class.STX:
            bt.set(s)
    elif cls == Class.JMP or cls == Class.JMP32:
        jop = op & 0xF0
        if jop == Jmp.CALL and insn.src == 1:
            # entering the callee when read forwards: leaving it when read backwards
            if bt.regs[bt.frame] & ~_ARGS:
                raise BacktrackBug("registers other than arguments precise at a call")
            if bt.slots[bt.frame]:
                raise BacktrackBug("callee stack slots precise at a call")
            for r in range(1, 6):
                if bt.has(r):
                    bt.clear(r)
                    bt.regs[bt.frame - 1] |= 1 << r
            bt.frame -= 1
            if bt.frame < 0:
                raise BacktrackBug("call from frame 0")
        elif jop == Jmp.CALL and insn.src == 0 and v.cfg.calls_callback[idx] and idx != subseq - 1:
            # the helper that called a callback, seen from the callback's exit
            if bt.regs[bt.frame] & ~_ARGS or bt.slots[bt.frame]:
                raise BacktrackBug("callback leaves precise registers")
            bt.regs[bt.frame] &= ~_ARGS
            bt.frame -= 1
            if bt.frame < 0:
                raise BacktrackBug("callback from frame 0")
        elif jop == Jmp.CALL:
            bt.clear(0)
            if bt.regs[bt.frame] & _ARGS:
                raise BacktrackBug("helper arguments precise after the call")
        elif jop == Jmp.EXIT:
            from_call = subseq - 1 >= 0 and _is_pseudo_call(v.insns[subseq - 1])
            r0 = from_call and bt.has(0)
            if from_call and bt.regs[bt.frame] & _ARGS:
                raise BacktrackBug("arguments precise after a return")
            bt.clear(0)
            bt.frame += 1
            if bt.frame >= 8:
                raise BacktrackBug("too many frames")
            if r0:
                bt.set(0)
            return
        elif op & 0x08:
            if not bt.has(d) and not bt.has(s):
                return
            if not flags & SRC_STACK:
                bt.set(s)
            if not flags & DST_STACK:
                bt.set(d)
    elif cls == Class.LD:
        if op == LDDW:
            bt.clear(d)
            return
        if bt.has(d):
            raise BacktrackBug("legacy packet load into a precise register")
        if subseq != idx + 1:
            bt.frame += 1
        return
    if linked:
        _sync_linked(bt, linked)


def _is_pseudo_call(insn) -> bool:
    return insn.opcode == (Class.JMP | Jmp.CALL) and insn.src == 1


def mark_all_precise(start: VState) -> None:
    """Make every scalar of every explored state above ``start`` precise (the fallback)."""
    st = start.parent
    while st is not None:
        for f in st.frames:
            regs = f.regs
            for i in range(10):
                r = regs[i]
                if r.type == T.SCALAR and not r.precise:
                    c = r.copy()
                    c.precise = True
                    regs[i] = c
            for k, slot in list(f.stack.items()):
                sp = slot.spill
                if sp is not None and slot.spilled and sp.type == T.SCALAR and not sp.precise:
                    c = sp.copy()
                    c.precise = True
                    f.stack[k] = Slot(slot.bytes, c)
        st = st.parent


def mark_precise(v, bt: Backtrack) -> None:
    """Walk the current path backwards from the current instruction and make
    precise, in the explored states, whatever the registers and slots in
    ``bt`` were computed from.

    ``v`` is the verifier (``insns``, ``cfg``, ``cur``, ``idx``).
    """
    if bt.empty():
        return
    st = v.cur
    first = st.first_insn
    last = v.idx
    subseq = -1
    skip_first = True
    insns = v.insns
    try:
        while True:
            hist = st.hist
            end = len(hist)
            i = last
            while True:
                if skip_first:
                    skip_first = False
                else:
                    h = hist[end - 1] if end and hist[end - 1][0] == i else None
                    insn = insns[i]
                    cls = insn.opcode & 7
                    # the common case, an ALU instruction whose result is not wanted, changes nothing
                    if h is not None or (cls != Class.ALU64 and cls != Class.ALU) \
                            or bt.regs[bt.frame] >> insn.dst & 1:
                        _backtrack_insn(v, i, subseq, h, bt)
                        if bt.empty():
                            return
                subseq = i
                # previous instruction
                if i == first:
                    if end == 0 or (end == 1 and hist[0][0] == i):
                        break
                if end and hist[end - 1][0] == i:
                    i = hist[end - 1][1]
                    end -= 1
                else:
                    i -= 1
                if i < 0:
                    raise BacktrackBug("backtracked past the first instruction")
            st = st.parent
            if st is None:
                break
            for fr in range(bt.frame, -1, -1):
                if fr >= len(st.frames):
                    raise BacktrackBug("frame missing in parent state")
                f = st.frames[fr]
                mask = bt.regs[fr]
                r = 0
                while mask >> r:
                    if mask >> r & 1:
                        reg = f.regs[r]
                        if reg.type != T.SCALAR or reg.precise:
                            bt.regs[fr] &= ~(1 << r)
                        else:
                            c = reg.copy()
                            c.precise = True
                            f.regs[r] = c
                    r += 1
                mask = bt.slots[fr]
                k = 0
                while mask >> k:
                    if mask >> k & 1:
                        slot = f.stack.get(k)
                        sp = slot.spill if slot is not None else None
                        if slot is None or sp is None or not slot.spilled or sp.type != T.SCALAR or sp.precise:
                            bt.slots[fr] &= ~(1 << k)
                        else:
                            c = sp.copy()
                            c.precise = True
                            f.stack[k] = Slot(slot.bytes, c)
                    k += 1
            if bt.empty():
                return
            subseq = first
            last = st.last_insn
            first = st.first_insn
            if last < 0:
                raise BacktrackBug("backtracked into the entry state")
        if not bt.empty():
            mark_all_precise(v.cur)
    except BacktrackBug:
        mark_all_precise(v.cur)

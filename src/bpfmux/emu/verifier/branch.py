"""Conditional jumps on scalars: is the outcome known, and what each side learns.

:func:`branch_taken` is the kernel's ``is_scalar_branch_taken`` (1, 0, or -1
for unknown) and :func:`refine` its ``regs_refine_cond_op`` followed by the
bounds synchronisation: both narrow exactly as much as the kernel's, so that
the same paths are explored.
"""

from __future__ import annotations

from ...isa.opcodes import Jmp
from .bounds import mark_unbounded, sanitize, sync
from .reg import Reg
from .tnum import U32, t_and, t_intersect, t_or, t_overlap

__all__ = ["FLIP", "JSET_FALSE", "REVERSE", "branch_taken", "refine"]

#: ``a op b`` is ``b FLIP[op] a``.
FLIP: dict[int, Jmp] = {
    Jmp.JEQ: Jmp.JEQ, Jmp.JNE: Jmp.JNE, Jmp.JSET: Jmp.JSET,
    Jmp.JGE: Jmp.JLE, Jmp.JGT: Jmp.JLT, Jmp.JLE: Jmp.JGE, Jmp.JLT: Jmp.JGT,
    Jmp.JSGE: Jmp.JSLE, Jmp.JSGT: Jmp.JSLT, Jmp.JSLE: Jmp.JSGE, Jmp.JSLT: Jmp.JSGT,
}
#: The condition of the fall-through side; ``JSET_FALSE`` stands for "no bit in common".
JSET_FALSE = Jmp.JSET | 0x08
REVERSE = {
    Jmp.JEQ: Jmp.JNE, Jmp.JNE: Jmp.JEQ, Jmp.JSET: JSET_FALSE, JSET_FALSE: Jmp.JSET,
    Jmp.JGE: Jmp.JLT, Jmp.JGT: Jmp.JLE, Jmp.JLE: Jmp.JGT, Jmp.JLT: Jmp.JGE,
    Jmp.JSGE: Jmp.JSLT, Jmp.JSGT: Jmp.JSLE, Jmp.JSLE: Jmp.JSGT, Jmp.JSLT: Jmp.JSGE,
}


def _is_const(r: Reg, j32: bool) -> bool:
    return (r.tm & U32 == 0) if j32 else r.tm == 0


def _const(r: Reg, j32: bool) -> int:
    return r.tv & U32 if j32 else r.tv


def branch_taken(a: Reg, b: Reg, op: int, j32: bool) -> int:
    """1: ``a op b`` always holds; 0: never; -1: it depends (two scalars)."""
    if j32:
        at, am, bt, bm = a.tv & U32, a.tm & U32, b.tv & U32, b.tm & U32
        aul, auh, asl, ash = a.u32min, a.u32max, a.s32min, a.s32max
        bul, buh, bsl, bsh = b.u32min, b.u32max, b.s32min, b.s32max
    else:
        at, am, bt, bm = a.tv, a.tm, b.tv, b.tm
        aul, auh, asl, ash = a.umin, a.umax, a.smin, a.smax
        bul, buh, bsl, bsh = b.umin, b.umax, b.smin, b.smax
    if op == Jmp.JEQ or op == Jmp.JNE:
        eq = op == Jmp.JEQ
        if am == 0 and bm == 0:
            return int((at == bt) == eq)
        if not t_overlap(at, am, bt, bm):
            return int(not eq)
        if aul > buh or auh < bul or asl > bsh or ash < bsl:
            return int(not eq)
        if not j32 and (a.u32min > b.u32max or a.u32max < b.u32min or a.s32min > b.s32max
                        or a.s32max < b.s32min):
            return int(not eq)
        return -1
    if op == Jmp.JSET:
        if not _is_const(b, j32):
            a, b = b, a
            at, am, bt, bm = bt, bm, at, am
        if not _is_const(b, j32):
            return -1
        if (~am & at) & bt:
            return 1
        if not ((am | at) & bt):
            return 0
        return -1
    if op == Jmp.JGT:
        return 1 if aul > buh else 0 if auh <= bul else -1
    if op == Jmp.JSGT:
        return 1 if asl > bsh else 0 if ash <= bsl else -1
    if op == Jmp.JLT:
        return 1 if auh < bul else 0 if aul >= buh else -1
    if op == Jmp.JSLT:
        return 1 if ash < bsl else 0 if asl >= bsh else -1
    if op == Jmp.JGE:
        return 1 if aul >= buh else 0 if auh < bul else -1
    if op == Jmp.JSGE:
        return 1 if asl >= bsh else 0 if ash < bsl else -1
    if op == Jmp.JLE:
        return 1 if auh <= bul else 0 if aul > buh else -1
    if op == Jmp.JSLE:
        return 1 if ash <= bsl else 0 if asl > bsh else -1
    return -1


def _refine(r1: Reg, r2: Reg, op: int, j32: bool) -> None:
    if op in (Jmp.JGE, Jmp.JGT, Jmp.JSGE, Jmp.JSGT):
        op = FLIP[op]
        r1, r2 = r2, r1
    if op == Jmp.JEQ:
        if j32:
            r1.u32min = max(r1.u32min, r2.u32min)
            r1.u32max = min(r1.u32max, r2.u32max)
            r1.s32min = max(r1.s32min, r2.s32min)
            r1.s32max = min(r1.s32max, r2.s32max)
            r2.u32min, r2.u32max, r2.s32min, r2.s32max = r1.u32min, r1.u32max, r1.s32min, r1.s32max
            v, m = t_intersect(r1.tv & U32, r1.tm & U32, r2.tv & U32, r2.tm & U32)
            r1.tv, r1.tm = (r1.tv & ~U32) | v, (r1.tm & ~U32) | m
            r2.tv, r2.tm = (r2.tv & ~U32) | v, (r2.tm & ~U32) | m
        else:
            r1.umin = max(r1.umin, r2.umin)
            r1.umax = min(r1.umax, r2.umax)
            r1.smin = max(r1.smin, r2.smin)
            r1.smax = min(r1.smax, r2.smax)
            r2.umin, r2.umax, r2.smin, r2.smax = r1.umin, r1.umax, r1.smin, r1.smax
            r1.tv, r1.tm = t_intersect(r1.tv, r1.tm, r2.tv, r2.tm)
            r2.tv, r2.tm = r1.tv, r1.tm
    elif op == Jmp.JNE:
        if not _is_const(r2, j32):
            r1, r2 = r2, r1
        if not _is_const(r2, j32):
            return
        val = _const(r2, j32)
        if j32:
            sval = val - (1 << 32) if val >> 31 else val
            if r1.u32min == val:
                r1.u32min += 1
            if r1.u32max == val:
                r1.u32max -= 1
            if r1.s32min == sval:
                r1.s32min += 1
            if r1.s32max == sval:
                r1.s32max -= 1
        else:
            sval = val - (1 << 64) if val >> 63 else val
            if r1.umin == val:
                r1.umin += 1
            if r1.umax == val:
                r1.umax -= 1
            if r1.smin == sval:
                r1.smin += 1
            if r1.smax == sval:
                r1.smax -= 1
    elif op == Jmp.JSET:
        if not _is_const(r2, j32):
            r1, r2 = r2, r1
        if not _is_const(r2, j32):
            return
        val = _const(r2, j32)
        if val == 0 or val & (val - 1):
            return
        if j32:
            v, m = t_or(r1.tv & U32, r1.tm & U32, val, 0)
            r1.tv, r1.tm = (r1.tv & ~U32) | v, (r1.tm & ~U32) | m
        else:
            r1.tv, r1.tm = t_or(r1.tv, r1.tm, val, 0)
    elif op == JSET_FALSE:
        if not _is_const(r2, j32):
            r1, r2 = r2, r1
        if not _is_const(r2, j32):
            return
        val = _const(r2, j32)
        mark_unbounded(r1)
        if j32:
            v, m = t_and(r1.tv & U32, r1.tm & U32, ~val & U32, 0)
            r1.tv, r1.tm = (r1.tv & ~U32) | v, (r1.tm & ~U32) | m
        else:
            r1.tv, r1.tm = t_and(r1.tv, r1.tm, ~val & ((1 << 64) - 1), 0)
    elif op == Jmp.JLE:
        if j32:
            r1.u32max = min(r1.u32max, r2.u32max)
            r2.u32min = max(r1.u32min, r2.u32min)
        else:
            r1.umax = min(r1.umax, r2.umax)
            r2.umin = max(r1.umin, r2.umin)
    elif op == Jmp.JLT:
        if j32:
            r1.u32max = min(r1.u32max, (r2.u32max - 1) & U32)
            r2.u32min = max((r1.u32min + 1) & U32, r2.u32min)
        else:
            r1.umax = min(r1.umax, (r2.umax - 1) & ((1 << 64) - 1))
            r2.umin = max((r1.umin + 1) & ((1 << 64) - 1), r2.umin)
    elif op == Jmp.JSLE:
        if j32:
            r1.s32max = min(r1.s32max, r2.s32max)
            r2.s32min = max(r1.s32min, r2.s32min)
        else:
            r1.smax = min(r1.smax, r2.smax)
            r2.smin = max(r1.smin, r2.smin)
    elif op == Jmp.JSLT:
        if j32:
            r1.s32max = min(r1.s32max, _wrap_s32(r2.s32max - 1))
            r2.s32min = max(_wrap_s32(r1.s32min + 1), r2.s32min)
        else:
            r1.smax = min(r1.smax, _wrap_s64(r2.smax - 1))
            r2.smin = max(_wrap_s64(r1.smin + 1), r2.smin)


def _wrap_s32(v: int) -> int:
    v &= U32
    return v - (1 << 32) if v >> 31 else v


def _wrap_s64(v: int) -> int:
    v &= (1 << 64) - 1
    return v - (1 << 64) if v >> 63 else v


def refine(r1: Reg, r2: Reg, op: int, j32: bool) -> None:
    """Narrow ``r1`` and ``r2`` (fresh copies) to the values for which ``r1 op r2``
    holds (``op`` may be :data:`JSET_FALSE`), then synchronise and sanity-check
    their bounds, as the kernel does on each side of a jump."""
    _refine(r1, r2, op, j32)
    sync(r1)
    sync(r2)
    sanitize(r1)
    sanitize(r2)

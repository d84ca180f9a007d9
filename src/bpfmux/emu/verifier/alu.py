"""Value tracking of scalar ALU operations, as precise as the kernel's and no more.

:func:`scalar_alu` updates a destination register for ``dst op= src`` with
the kernel verifier's rules (``adjust_scalar_min_max_vals`` of Linux 6.18):
add, sub, mul, and, or, xor and the shifts by a known in-range amount
compute new bounds and tnum on 32 and 64 bits; division, modulo, and shifts
by an unknown or too large amount give an unknown value. :func:`scalar_neg`
and :func:`scalar_end` are negation and the byte swaps. Being more precise
than the kernel would prune paths the kernel explores (and accept programs
it rejects); being less precise would reject programs it accepts.

Every function changes the destination register in place: pass a fresh copy.
"""

from __future__ import annotations

from ...isa.opcodes import Alu
from .bounds import (
    coerce_size,
    mark_32_unbounded,
    mark_64_unbounded,
    mark_unbounded,
    sync,
    update_bounds,
    zext_32_to_64,
)
from .reg import S32_MAX, S32_MIN, S64_MAX, S64_MIN, Reg, T
from .tnum import (
    U32,
    U64,
    t_add,
    t_and,
    t_arshift,
    t_bswap,
    t_lshift,
    t_mul,
    t_or,
    t_rshift,
    t_sub,
    t_xor,
)

__all__ = ["fork_width", "safe_to_compute", "scalar_alu", "scalar_end", "scalar_neg"]


def safe_to_compute(op: int, src: Reg, alu32: bool) -> bool:
    """Whether the kernel computes a range for ``op`` (otherwise the result is unknown)."""
    if op in (Alu.ADD, Alu.SUB, Alu.AND, Alu.XOR, Alu.OR, Alu.MUL):
        return True
    if op in (Alu.LSH, Alu.RSH, Alu.ARSH):
        if alu32:
            known = src.tm & U32 == 0 and src.s32min == src.s32max and src.u32min == src.u32max
        else:
            known = src.tm == 0 and src.smin == src.smax and src.umin == src.umax
        return known and src.umax < (32 if alu32 else 64)
    return False


def fork_width(dst: Reg) -> int:
    """For ``and``/``or`` with a constant: 64 or 32 when ``dst`` is -1 or 0 (on
    that many bits) and the kernel verifies the two values separately; 0 otherwise."""
    if dst.smin == -1 and dst.smax == 0:
        return 64
    if dst.s32min == -1 and dst.s32max == 0:
        return 32
    return 0


# ---------------------------------------------------------------------------- 32/64-bit range rules


def _add32(d: Reg, s: Reg) -> None:
    lo, hi = d.s32min + s.s32min, d.s32max + s.s32max
    if lo < S32_MIN or lo > S32_MAX or hi < S32_MIN or hi > S32_MAX:
        d.s32min, d.s32max = S32_MIN, S32_MAX
    else:
        d.s32min, d.s32max = lo, hi
    lo, hi = d.u32min + s.u32min, d.u32max + s.u32max
    if lo <= U32 < hi:  # some sums wrap, others do not
        d.u32min, d.u32max = 0, U32
    else:
        d.u32min, d.u32max = lo & U32, hi & U32


def _add64(d: Reg, s: Reg) -> None:
    lo, hi = d.smin + s.smin, d.smax + s.smax
    if lo < S64_MIN or lo > S64_MAX or hi < S64_MIN or hi > S64_MAX:
        d.smin, d.smax = S64_MIN, S64_MAX
    else:
        d.smin, d.smax = lo, hi
    lo, hi = d.umin + s.umin, d.umax + s.umax
    if lo <= U64 < hi:
        d.umin, d.umax = 0, U64
    else:
        d.umin, d.umax = lo & U64, hi & U64


def _sub32(d: Reg, s: Reg) -> None:
    lo, hi = d.s32min - s.s32max, d.s32max - s.s32min
    if lo < S32_MIN or lo > S32_MAX or hi < S32_MIN or hi > S32_MAX:
        d.s32min, d.s32max = S32_MIN, S32_MAX
    else:
        d.s32min, d.s32max = lo, hi
    lo, hi = d.u32min - s.u32max, d.u32max - s.u32min
    if lo < 0 <= hi:  # some differences wrap, others do not
        d.u32min, d.u32max = 0, U32
    else:
        d.u32min, d.u32max = lo & U32, hi & U32


def _sub64(d: Reg, s: Reg) -> None:
    lo, hi = d.smin - s.smax, d.smax - s.smin
    if lo < S64_MIN or lo > S64_MAX or hi < S64_MIN or hi > S64_MAX:
        d.smin, d.smax = S64_MIN, S64_MAX
    else:
        d.smin, d.smax = lo, hi
    lo, hi = d.umin - s.umax, d.umax - s.umin
    if lo < 0 <= hi:
        d.umin, d.umax = 0, U64
    else:
        d.umin, d.umax = lo & U64, hi & U64


def _mul32(d: Reg, s: Reg) -> None:
    hi, lo = d.u32max * s.u32max, d.u32min * s.u32min
    if hi > U32 or lo > U32:
        d.u32min, d.u32max = 0, U32
    else:
        d.u32min, d.u32max = lo, hi
    prods = (d.s32min * s.s32min, d.s32min * s.s32max, d.s32max * s.s32min, d.s32max * s.s32max)
    lo, hi = min(prods), max(prods)
    if lo < S32_MIN or hi > S32_MAX:
        d.s32min, d.s32max = S32_MIN, S32_MAX
    else:
        d.s32min, d.s32max = lo, hi


def _mul64(d: Reg, s: Reg) -> None:
    hi, lo = d.umax * s.umax, d.umin * s.umin
    if hi > U64 or lo > U64:
        d.umin, d.umax = 0, U64
    else:
        d.umin, d.umax = lo, hi
    prods = (d.smin * s.smin, d.smin * s.smax, d.smax * s.smin, d.smax * s.smax)
    lo, hi = min(prods), max(prods)
    if lo < S64_MIN or hi > S64_MAX:
        d.smin, d.smax = S64_MIN, S64_MAX
    else:
        d.smin, d.smax = lo, hi


def _s32_from_u32(d: Reg) -> None:
    lo, hi = d.u32min, d.u32max
    slo = lo - (1 << 32) if lo >> 31 else lo
    shi = hi - (1 << 32) if hi >> 31 else hi
    if slo <= shi:
        d.s32min, d.s32max = slo, shi
    else:
        d.s32min, d.s32max = S32_MIN, S32_MAX


def _s64_from_u64(d: Reg) -> None:
    lo, hi = d.umin, d.umax
    slo = lo - (1 << 64) if lo >> 63 else lo
    shi = hi - (1 << 64) if hi >> 63 else hi
    if slo <= shi:
        d.smin, d.smax = slo, shi
    else:
        d.smin, d.smax = S64_MIN, S64_MAX


def _bitwise(d: Reg, s: Reg, op: int) -> None:
    """and / or / xor: the tnum first, then the bounds from it (32 and 64 bits)."""
    src_const = s.tm == 0
    src_const32 = s.tm & U32 == 0
    dst_const = d.tm == 0  # before the tnum update, as the kernel tests it after: see below
    if op == Alu.AND:
        d.tv, d.tm = t_and(d.tv, d.tm, s.tv, s.tm)
    elif op == Alu.OR:
        d.tv, d.tm = t_or(d.tv, d.tm, s.tv, s.tm)
    else:
        d.tv, d.tm = t_xor(d.tv, d.tm, s.tv, s.tm)
    v32, m32 = d.tv & U32, d.tm & U32
    # 32-bit part (the kernel tests "known" on the updated dst tnum)
    if src_const32 and m32 == 0:
        d.u32min = d.u32max = v32
        d.s32min = d.s32max = v32 - (1 << 32) if v32 >> 31 else v32
    else:
        if op == Alu.AND:
            d.u32min, d.u32max = v32, min(d.u32max, s.u32max)
        elif op == Alu.OR:
            d.u32min, d.u32max = max(d.u32min, s.u32min), v32 | m32
        else:
            d.u32min, d.u32max = v32, v32 | m32
        _s32_from_u32(d)
    # 64-bit part
    del dst_const
    if src_const and d.tm == 0:
        v = d.tv
        d.umin = d.umax = v
        d.smin = d.smax = v - (1 << 64) if v >> 63 else v
        return
    if op == Alu.AND:
        d.umin, d.umax = d.tv, min(d.umax, s.umax)
    elif op == Alu.OR:
        d.umin, d.umax = max(d.umin, s.umin), d.tv | d.tm
    else:
        d.umin, d.umax = d.tv, d.tv | d.tm
    _s64_from_u64(d)
    update_bounds(d)


def _lsh32_bounds(d: Reg, umin: int, umax: int) -> None:
    d.s32min, d.s32max = S32_MIN, S32_MAX
    if umax > 31 or d.u32max > 1 << (31 - umax):
        d.u32min, d.u32max = 0, U32
    else:
        d.u32min <<= umin
        d.u32max <<= umax


def _lsh64_bounds(d: Reg, umin: int, umax: int) -> None:
    if umin == 32 and umax == 32:
        d.smax = d.s32max << 32
        d.smin = d.s32min << 32
    else:
        d.smin, d.smax = S64_MIN, S64_MAX
    if umax > 63 or d.umax > 1 << (63 - umax):
        d.umin, d.umax = 0, U64
    else:
        d.umin <<= umin
        d.umax <<= umax


def _shift(d: Reg, s: Reg, op: int, alu32: bool) -> None:
    if alu32:
        k = s.u32min
        if op == Alu.LSH:
            sv, sm = d.tv & U32, d.tm & U32
            _lsh32_bounds(d, k, s.u32max)
            v, m = t_lshift(sv, sm, k)
            d.tv, d.tm = v & U32, m & U32
            mark_64_unbounded(d)
        elif op == Alu.RSH:
            sv, sm = d.tv & U32, d.tm & U32
            d.s32min, d.s32max = S32_MIN, S32_MAX
            d.tv, d.tm = t_rshift(sv, sm, k)
            d.u32min >>= s.u32max
            d.u32max >>= k
            mark_64_unbounded(d)
        else:
            d.s32min >>= k
            d.s32max >>= k
            d.tv, d.tm = t_arshift(d.tv & U32, d.tm & U32, k, 32)
            d.u32min, d.u32max = 0, U32
            mark_64_unbounded(d)
        update_bounds(d)
        return
    k = s.umin
    if op == Alu.LSH:
        _lsh64_bounds(d, k, s.umax)
        _lsh32_bounds(d, k, s.umax)
        d.tv, d.tm = t_lshift(d.tv, d.tm, k)
    elif op == Alu.RSH:
        d.smin, d.smax = S64_MIN, S64_MAX
        d.tv, d.tm = t_rshift(d.tv, d.tm, k)
        d.umin >>= s.umax
        d.umax >>= k
        mark_32_unbounded(d)
    else:
        d.smin >>= k
        d.smax >>= k
        d.tv, d.tm = t_arshift(d.tv, d.tm, k, 64)
        d.umin, d.umax = 0, U64
        mark_32_unbounded(d)
    update_bounds(d)


def scalar_alu(dst: Reg, src: Reg, op: int, alu32: bool) -> None:
    """``dst op= src`` on two scalars (``dst`` changed in place; 32-bit results zero-extended).

    The caller has already split ``and``/``or`` of a -1/0 value (:func:`fork_width`).
    """
    if not safe_to_compute(op, src, alu32):
        _unknown(dst)
        return
    if op == Alu.ADD:
        _add32(dst, src)
        _add64(dst, src)
        dst.tv, dst.tm = t_add(dst.tv, dst.tm, src.tv, src.tm)
    elif op == Alu.SUB:
        _sub32(dst, src)
        _sub64(dst, src)
        dst.tv, dst.tm = t_sub(dst.tv, dst.tm, src.tv, src.tm)
    elif op == Alu.MUL:
        dst.tv, dst.tm = t_mul(dst.tv, dst.tm, src.tv, src.tm)
        _mul32(dst, src)
        _mul64(dst, src)
    elif op in (Alu.AND, Alu.OR, Alu.XOR):
        _bitwise(dst, src, op)
    else:
        _shift(dst, src, op, alu32)
    if alu32:
        zext_32_to_64(dst)
    sync(dst)


def _unknown(r: Reg) -> None:
    """Make ``r`` an unknown scalar (``__mark_reg_unknown``), keeping nothing."""
    r.type = T.SCALAR
    r.off = 0
    r.id = 0
    r.ref = 0
    r.null = False
    r.map = None
    r.size = 0
    r.frame = 0
    r.rdonly = False
    r.btf = None
    r.subprog = -1
    r.precise = False
    r.tv, r.tm = 0, U64
    mark_unbounded(r)


def scalar_neg(dst: Reg, alu32: bool) -> None:
    """``dst = -dst``: ``0 - dst`` with the subtraction's rules."""
    src = dst.copy()
    dst.set_const(0)
    _sub32(dst, src)
    _sub64(dst, src)
    dst.tv, dst.tm = t_sub(0, 0, src.tv, src.tm)
    if alu32:
        zext_32_to_64(dst)
    sync(dst)


def scalar_end(dst: Reg, width: int, swap: bool) -> bool:
    """Byte swap (``swap``) or truncation (``le16``/``le32`` on this little-endian
    machine) to ``width`` bits; ``le64`` changes nothing.

    :returns: whether the register changed (``le64`` keeps even its id).
    """
    if not swap:
        if width == 64:
            return False
        dst.id = 0
        coerce_size(dst, width // 8)
        return True
    dst.id = 0
    dst.tv, dst.tm = t_bswap(dst.tv, dst.tm, width)
    mark_unbounded(dst)
    sync(dst)
    return True

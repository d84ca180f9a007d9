"""Keeping a register's bounds consistent with each other (the kernel's rules).

A register carries eight bounds (unsigned and signed, 64 and 32 bits) and a
tnum; each can teach the others something. :func:`sync` applies the
kernel's deductions (``reg_bounds_sync``: bounds from the tnum, the 32-bit
bounds from the 64-bit ones and back, signed from unsigned and back, then
the tnum from the bounds) — no more and no less, so that what bpfmux's
verifier knows about a value is what the kernel's knows. The other
functions are the kernel's elementary register updates (make known, make
unbounded, zero-extend a 32-bit result, truncate or sign-extend to a size).

All functions change the :class:`~.reg.Reg` they are given in place: give
them fresh copies.
"""

from __future__ import annotations

from .reg import S32_MAX, S32_MIN, S64_MAX, S64_MIN, Reg
from .tnum import HI32, U32, U64, t_intersect, t_next, t_range

__all__ = ["assign_32_into_64", "coerce_size", "coerce_size_sx", "coerce_subreg_size_sx", "is_sane",
           "mark_32_known", "mark_32_unbounded", "mark_64_unbounded", "mark_unbounded", "sanitize", "sync", "update_bounds",
           "zext_32_to_64"]

_SIGN64 = 1 << 63
_SIGN32 = 1 << 31


def _s64(v: int) -> int:
    v &= U64
    return v - (1 << 64) if v & _SIGN64 else v


def _s32(v: int) -> int:
    v &= U32
    return v - (1 << 32) if v & _SIGN32 else v


def mark_unbounded(r: Reg) -> None:
    """Forget all eight bounds (the tnum stays)."""
    r.smin, r.smax, r.umin, r.umax = S64_MIN, S64_MAX, 0, U64
    r.s32min, r.s32max, r.u32min, r.u32max = S32_MIN, S32_MAX, 0, U32


def mark_64_unbounded(r: Reg) -> None:
    """Forget the 64-bit bounds."""
    r.smin, r.smax, r.umin, r.umax = S64_MIN, S64_MAX, 0, U64


def mark_32_unbounded(r: Reg) -> None:
    """Forget the 32-bit bounds."""
    r.s32min, r.s32max, r.u32min, r.u32max = S32_MIN, S32_MAX, 0, U32


def mark_32_known(r: Reg, v: int) -> None:
    """Make the low 32 bits exactly ``v``."""
    lo = v & U32
    r.tv = (r.tv & HI32) | lo
    r.tm &= HI32
    r.u32min = r.u32max = lo
    r.s32min = r.s32max = _s32(lo)


def update_bounds(r: Reg) -> None:
    """Bounds learnt from the tnum (``__update_reg_bounds``)."""
    tv, tm = r.tv, r.tm
    v32, m32 = tv & U32, tm & U32
    lo = v32 | (m32 & _SIGN32)
    hi = v32 | (m32 & (_SIGN32 - 1))
    lo = lo - (1 << 32) if lo & _SIGN32 else lo
    hi = hi - (1 << 32) if hi & _SIGN32 else hi
    if lo > r.s32min:
        r.s32min = lo
    if hi < r.s32max:
        r.s32max = hi
    if v32 > r.u32min:
        r.u32min = v32
    if v32 | m32 < r.u32max:
        r.u32max = v32 | m32
    lo = tv | (tm & _SIGN64)
    hi = tv | (tm & (_SIGN64 - 1))
    lo = lo - (1 << 64) if lo & _SIGN64 else lo
    hi = hi - (1 << 64) if hi & _SIGN64 else hi
    if lo > r.smin:
        r.smin = lo
    if hi < r.smax:
        r.smax = hi
    if tv > r.umin:
        r.umin = tv
    if tv | tm < r.umax:
        r.umax = tv | tm
    if tm:
        _single_overlap(r, tv, tm)


def _single_overlap(r: Reg, tv: int, tm: int) -> None:
    """When the unsigned range and the tnum have one value in common (or none),
    the register is that value."""
    umin, umax = r.umin, r.umax
    nxt = t_next(tv, tm, umin)
    umin_in = umin & ~tm == tv
    if umin_in:
        if nxt > umax:
            r.set_const(umin)
    elif nxt == tv | tm:
        r.set_const(nxt)
    elif nxt <= umax and t_next(tv, tm, nxt) > umax:
        r.set_const(nxt)


def _deduce32(r: Reg) -> None:
    umin, umax, smin, smax = r.umin, r.umax, r.smin, r.smax
    if umin >> 32 == umax >> 32:
        lo, hi = umin & U32, umax & U32
        r.u32min = max(r.u32min, lo)
        r.u32max = min(r.u32max, hi)
        slo, shi = _s32(lo), _s32(hi)
        if slo <= shi:
            r.s32min = max(r.s32min, slo)
            r.s32max = min(r.s32max, shi)
    if smin >> 32 == smax >> 32:
        lo, hi = smin & U32, smax & U32
        if lo <= hi:
            r.u32min = max(r.u32min, lo)
            r.u32max = min(r.u32max, hi)
        slo, shi = _s32(lo), _s32(hi)
        if slo <= shi:
            r.s32min = max(r.s32min, slo)
            r.s32max = min(r.s32max, shi)
    # upper halves two consecutive numbers, lower halves a range crossing zero
    if ((umin >> 32) + 1) & U32 == (umax >> 32) & U32:
        slo, shi = _s32(umin), _s32(umax)
        if slo < 0 <= shi:
            r.s32min = max(r.s32min, slo)
            r.s32max = min(r.s32max, shi)
    if ((smin >> 32) + 1) & U32 == (smax >> 32) & U32:
        slo, shi = _s32(smin), _s32(smax)
        if slo < 0 <= shi:
            r.s32min = max(r.s32min, slo)
            r.s32max = min(r.s32max, shi)
    # u32 range as an s32 range
    slo, shi = _s32(r.u32min), _s32(r.u32max)
    if slo <= shi:
        r.s32min = max(r.s32min, slo)
        r.s32max = min(r.s32max, shi)
    # s32 range as a u32 range
    ulo, uhi = r.s32min & U32, r.s32max & U32
    if ulo <= uhi:
        r.u32min = max(r.u32min, ulo)
        r.u32max = min(r.u32max, uhi)
    elif r.u32max < ulo:
        r.s32min = _s32(r.u32min)
        r.u32max = min(r.u32max, uhi)
    elif uhi < r.u32min:
        r.s32max = _s32(r.u32max)
        r.u32min = max(r.u32min, ulo)


def _deduce64(r: Reg) -> None:
    slo, shi = _s64(r.umin), _s64(r.umax)
    if slo <= shi:
        r.smin = max(r.smin, slo)
        r.smax = min(r.smax, shi)
    ulo, uhi = r.smin & U64, r.smax & U64
    if ulo <= uhi:
        r.umin = max(r.umin, ulo)
        r.umax = min(r.umax, uhi)
    elif r.umax < ulo:
        r.smin = _s64(r.umin)
        r.umax = min(r.umax, uhi)
    elif uhi < r.umin:
        r.smax = _s64(r.umax)
        r.umin = max(r.umin, ulo)


def _deduce_mixed(r: Reg) -> None:
    u32min, u32max = r.u32min, r.u32max
    r.umin = max(r.umin, (r.umin & HI32) | u32min)
    r.umax = min(r.umax, (r.umax & HI32) | u32max)
    r.smin = max(r.smin, _s64((r.smin & HI32) | u32min))
    r.smax = min(r.smax, _s64((r.smax & HI32) | u32max))
    lo, hi = r.s32min & U32, r.s32max & U32
    if lo <= hi:
        r.umin = max(r.umin, (r.umin & HI32) | lo)
        r.umax = min(r.umax, (r.umax & HI32) | hi)
        r.smin = max(r.smin, _s64((r.smin & HI32) | lo))
        r.smax = min(r.smax, _s64((r.smax & HI32) | hi))
    if r.s32min >= 0 and r.smin >= S32_MIN and r.smax <= S32_MAX:
        r.smin = r.umin = r.s32min
        r.smax = r.umax = r.s32max
        tv, tm = t_range(r.smin, r.smax)
        r.tv, r.tm = t_intersect(r.tv, r.tm, tv, tm)


def _bound_offset(r: Reg) -> None:
    v64, m64 = t_intersect(r.tv, r.tm, *t_range(r.umin, r.umax))
    v32, m32 = t_intersect(v64 & U32, m64 & U32, *t_range(r.u32min, r.u32max))
    r.tv = (v64 & HI32) | v32
    r.tm = (m64 & HI32) | m32


def sync(r: Reg) -> None:
    """Make every bound and the tnum as tight as the others allow (``reg_bounds_sync``)."""
    if r.tm == 0:  # a constant: everything follows
        v = r.tv
        if r.umin <= v <= r.umax and r.smin <= _s64(v) <= r.smax and r.u32min <= v & U32 <= r.u32max \
                and r.s32min <= _s32(v) <= r.s32max:
            r.set_const(v)
            return
    update_bounds(r)
    # the kernel deduces three rounds; a round that changes nothing ends them early (same result)
    for _ in range(3):
        before = (r.umin, r.umax, r.smin, r.smax, r.u32min, r.u32max, r.s32min, r.s32max, r.tv, r.tm)
        _deduce32(r)
        _deduce64(r)
        _deduce_mixed(r)
        if before == (r.umin, r.umax, r.smin, r.smax, r.u32min, r.u32max, r.s32min, r.s32max, r.tv, r.tm):
            break
    _bound_offset(r)
    update_bounds(r)


def sanitize(r: Reg) -> None:
    """The kernel's invariant check: bounds that contradict each other (a value
    on a path that cannot happen) are forgotten (the tnum stays)."""
    if not is_sane(r):
        mark_unbounded(r)
        sync(r)


def is_sane(r: Reg) -> bool:
    """Whether the bounds describe at least one value, consistently with a constant tnum."""
    if r.umin > r.umax or r.smin > r.smax or r.u32min > r.u32max or r.s32min > r.s32max:
        return False
    if r.tm == 0:
        v = r.tv
        if r.umin != v or r.umax != v or r.smin != _s64(v) or r.smax != _s64(v):
            return False
    if r.tm & U32 == 0:
        v = r.tv & U32
        if r.u32min != v or r.u32max != v or r.s32min != _s32(v) or r.s32max != _s32(v):
            return False
    return True


def assign_32_into_64(r: Reg) -> None:
    """64-bit bounds from the 32-bit ones of a zero-extended value."""
    r.umin, r.umax = r.u32min, r.u32max
    if 0 <= r.s32min and 0 <= r.s32max:
        r.smin, r.smax = r.s32min, r.s32max
    else:
        r.smin, r.smax = 0, U32


def zext_32_to_64(r: Reg) -> None:
    """The register after a 32-bit operation: upper half zero."""
    r.tv &= U32
    r.tm &= U32
    assign_32_into_64(r)


def coerce_size(r: Reg, size: int) -> None:
    """Truncate to the low ``size`` (< 8) bytes (a narrow load or spill fill)."""
    mask = (1 << (8 * size)) - 1
    r.tv &= mask
    r.tm &= mask
    if r.umin & ~mask == r.umax & ~mask:
        r.umin &= mask
        r.umax &= mask
    else:
        r.umin, r.umax = 0, mask
    r.smin, r.smax = r.umin, r.umax
    if size < 4:
        mark_32_unbounded(r)
    sync(r)


_SX_LIMITS = {1: (-(1 << 7), (1 << 7) - 1), 2: (-(1 << 15), (1 << 15) - 1), 4: (S32_MIN, S32_MAX)}


def _sext(v: int, bits: int) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


def coerce_size_sx(r: Reg, size: int) -> None:
    """Sign-extend the low ``size`` bytes to 64 bits (``movsx``, sign-extending loads)."""
    bits = 8 * size
    if r.tm == 0:
        r.set_const(_sext(r.tv, bits))
        return
    if (r.smax & U64) >> bits == (r.smin & U64) >> bits:
        a, b = _sext(r.smax, bits), _sext(r.smin, bits)
        hi, lo = max(a, b), min(a, b)
        if (hi >= 0) == (lo >= 0):
            r.smin, r.smax = lo, hi
            r.s32min, r.s32max = _s32(lo), _s32(hi)
            r.umin, r.umax = lo & U64, hi & U64
            r.u32min, r.u32max = lo & U32, hi & U32
            r.tv, r.tm = t_range(lo & U64, hi & U64)
            return
    lo, hi = _SX_LIMITS[size]
    if lo <= r.s32min and r.s32max <= hi:
        # the low bits already hold a value of that signed size: the 32-bit
        # bounds stay and the 64-bit value is the 32-bit one, sign-extended
        r.smin, r.smax = r.s32min, r.s32max
        r.umin, r.umax = 0, U64
        r.tv, r.tm = 0, U64
        sync(r)
        return
    r.smin = r.s32min = lo
    r.smax = r.s32max = hi
    r.umin = r.u32min = 0
    r.umax, r.u32max = U64, U32
    r.tv, r.tm = 0, U64


def coerce_subreg_size_sx(r: Reg, size: int) -> None:
    """Sign-extend the low ``size`` (1 or 2) bytes to 32 bits (32-bit ``movsx``)."""
    bits = 8 * size
    if r.tm == 0:
        v = _sext(r.tv, bits) & U64
        r.tv, r.tm = v, 0
        r.s32min = r.s32max = _s32(v)
        r.u32min = r.u32max = v & U32
        return
    if (r.s32max & U32) >> bits == (r.s32min & U32) >> bits:
        a, b = _sext(r.s32max, bits), _sext(r.s32min, bits)
        hi, lo = max(a, b), min(a, b)
        if (hi >= 0) == (lo >= 0):
            r.s32min, r.s32max = lo, hi
            r.u32min, r.u32max = lo & U32, hi & U32
            r.tv, r.tm = t_range(lo & U32, hi & U32)
            return
    r.s32min, r.s32max = _SX_LIMITS[size]
    r.u32min, r.u32max = 0, U32
    r.tv, r.tm = 0, U32

"""Tristate numbers: 64-bit values of which some bits are known.

A tnum is a pair ``(value, mask)`` of unsigned 64-bit ints: bits set in
``mask`` are unknown, the others equal the bits of ``value`` (which has
zeros where ``mask`` has ones). The operations are the kernel verifier's
(``kernel/bpf/tnum.c``), written over Python ints; every result is reduced
to 64 bits.
"""

from __future__ import annotations

U64 = (1 << 64) - 1
U32 = (1 << 32) - 1
HI32 = U64 ^ U32

#: The tnum with every bit unknown.
UNKNOWN = (0, U64)

__all__ = [
    "HI32", "U32", "U64", "UNKNOWN", "t_add", "t_and", "t_arshift", "t_bswap", "t_cast", "t_in", "t_intersect",
    "t_lshift", "t_mul", "t_neg", "t_next", "t_or", "t_overlap", "t_range", "t_rshift", "t_sub", "t_subreg", "t_union",
    "t_with_subreg", "t_xor",
]


def t_range(lo: int, hi: int) -> tuple[int, int]:
    """The smallest tnum holding every value of the unsigned range ``[lo, hi]``."""
    n = (lo ^ hi).bit_length()
    if n > 63:
        return UNKNOWN
    delta = (1 << n) - 1
    return lo & ~delta, delta


def t_lshift(v: int, m: int, k: int) -> tuple[int, int]:
    """``a << k`` (64 bits)."""
    return (v << k) & U64, (m << k) & U64


def t_rshift(v: int, m: int, k: int) -> tuple[int, int]:
    """``a >> k`` (logical)."""
    return v >> k, m >> k


def t_arshift(v: int, m: int, k: int, bits: int) -> tuple[int, int]:
    """Arithmetic ``a >> k`` on ``bits`` (32 or 64) bits; a 32-bit result is zero-extended."""
    width = (1 << bits) - 1
    sign = 1 << (bits - 1)
    sv = (v & width) - ((v & sign) << 1)
    sm = (m & width) - ((m & sign) << 1)
    return (sv >> k) & width, (sm >> k) & width


def t_add(av: int, am: int, bv: int, bm: int) -> tuple[int, int]:
    """``a + b``."""
    sm = am + bm
    sv = av + bv
    chi = (sm + sv) ^ sv
    mu = (chi | am | bm) & U64
    return sv & ~mu & U64, mu


def t_sub(av: int, am: int, bv: int, bm: int) -> tuple[int, int]:
    """``a - b``."""
    dv = (av - bv) & U64
    chi = ((dv + am) ^ (dv - bm)) & U64
    mu = chi | am | bm
    return dv & ~mu, mu


def t_neg(v: int, m: int) -> tuple[int, int]:
    """``-a`` (``0 - a``)."""
    return t_sub(0, 0, v, m)


def t_and(av: int, am: int, bv: int, bm: int) -> tuple[int, int]:
    """``a & b``."""
    v = av & bv
    return v, (av | am) & (bv | bm) & ~v


def t_or(av: int, am: int, bv: int, bm: int) -> tuple[int, int]:
    """``a | b``."""
    v = av | bv
    return v, (am | bm) & ~v


def t_xor(av: int, am: int, bv: int, bm: int) -> tuple[int, int]:
    """``a ^ b``."""
    mu = am | bm
    return (av ^ bv) & ~mu, mu


def t_union(av: int, am: int, bv: int, bm: int) -> tuple[int, int]:
    """A tnum holding every value of ``a`` and of ``b``."""
    mu = am | bm | (av ^ bv)
    return av & ~mu, mu


def t_mul(av: int, am: int, bv: int, bm: int) -> tuple[int, int]:
    """``a * b``: long multiplication, a partial product per bit of ``a``."""
    acc_v, acc_m = 0, 0
    while av or am:
        if av & 1:
            acc_v, acc_m = t_add(acc_v, acc_m, bv, bm)
        elif am & 1:
            sv, sm = t_add(acc_v, acc_m, bv, bm)
            acc_v, acc_m = t_union(acc_v, acc_m, sv, sm)
        av >>= 1
        am >>= 1
        bv = (bv << 1) & U64
        bm = (bm << 1) & U64
    return acc_v, acc_m


def t_next(v: int, m: int, z: int) -> int:
    """The smallest value of the tnum above ``z`` (its lowest value when ``z``
    is below it, its highest when ``z`` is not below that)."""
    tmax = v | m
    if z >= tmax:
        return tmax
    if z < v:
        return v
    y = z + 1
    j = v | (y & m)  # agrees with y on the unknown bits
    if j == y:
        return y
    h = (j ^ y).bit_length() - 1  # highest differing bit: a known one
    above = U64 ^ ((2 << h) - 1)
    if j > y:  # a known 1 where y has 0: keep y above it, lowest completion below
        return (y & above) | (v & ~above)
    # a known 0 where y has 1: count up in the unknown bits above it
    free = m & above
    x = (((y & free) | (U64 ^ free)) + 1) & free
    return v | x


def t_overlap(av: int, am: int, bv: int, bm: int) -> bool:
    """Whether ``a`` and ``b`` have a value in common."""
    mu = ~am & ~bm
    return (av & mu) == (bv & mu)


def t_intersect(av: int, am: int, bv: int, bm: int) -> tuple[int, int]:
    """The values in both ``a`` and ``b`` (meaningful when they overlap)."""
    v = av | bv
    mu = am & bm
    return v & ~mu, mu


def t_cast(v: int, m: int, size: int) -> tuple[int, int]:
    """The low ``size`` bytes."""
    keep = (1 << (8 * size)) - 1
    return v & keep, m & keep


def t_in(av: int, am: int, bv: int, bm: int) -> bool:
    """Whether every value of ``b`` is a value of ``a``."""
    if bm & ~am:
        return False
    return av == (bv & ~am)


def t_subreg(v: int, m: int) -> tuple[int, int]:
    """The low 32 bits."""
    return v & U32, m & U32


def t_with_subreg(v: int, m: int, sv: int, sm: int) -> tuple[int, int]:
    """``v``'s high 32 bits with the low 32 bits of ``s``."""
    return (v & HI32) | (sv & U32), (m & HI32) | (sm & U32)


def t_bswap(v: int, m: int, width: int) -> tuple[int, int]:
    """Reverse the bytes of the low ``width`` bits (the rest cleared)."""
    n = width // 8
    keep = (1 << width) - 1
    return (int.from_bytes((v & keep).to_bytes(n, "little"), "big"),
            int.from_bytes((m & keep).to_bytes(n, "little"), "big"))

"""Scalar arithmetic and branch refinement for the emulator's verifier.

:func:`scalar_alu` computes the abstract result of an ALU/ALU64 operation on
two scalars (bounds + tnum), exactly when both are constants. :func:`branch`
decides whether a conditional jump is always/never taken and narrows both
operands on each side (the kernel's ``is_branch_taken`` and
``reg_set_min_max``).
"""

from __future__ import annotations

from ...isa.opcodes import Alu, Jmp
from .state import (
    S32_MAX,
    S32_MIN,
    S64_MAX,
    S64_MIN,
    U32,
    Reg,
    tnum_add,
    tnum_and,
    tnum_intersect,
    tnum_or,
    tnum_range,
    tnum_sub,
    tnum_xor,
    to_signed,
)

# ---------------------------------------------------------------------------- exact evaluation


def _exact(op: int, a: int, b: int, bits: int, off: int) -> int | None:
    """BPF semantics of ``a op b`` on ``bits``-wide unsigned operands."""
    mask = (1 << bits) - 1
    a &= mask
    b &= mask
    if op == Alu.ADD:
        return (a + b) & mask
    if op == Alu.SUB:
        return (a - b) & mask
    if op == Alu.MUL:
        return (a * b) & mask
    if op == Alu.DIV:
        if off == 1:  # sdiv
            sa, sb = to_signed(a, bits), to_signed(b, bits)
            if sb == 0:
                return 0
            q = abs(sa) // abs(sb)
            return (q if (sa >= 0) == (sb >= 0) else -q) & mask
        return a // b if b else 0
    if op == Alu.MOD:
        if off == 1:  # smod
            sa, sb = to_signed(a, bits), to_signed(b, bits)
            if sb == 0:
                return a
            r = abs(sa) % abs(sb)
            return (r if sa >= 0 else -r) & mask
        return a % b if b else a
    if op == Alu.OR:
        return a | b
    if op == Alu.AND:
        return a & b
    if op == Alu.XOR:
        return a ^ b
    if op == Alu.LSH:
        return (a << (b & (bits - 1))) & mask
    if op == Alu.RSH:
        return a >> (b & (bits - 1))
    if op == Alu.ARSH:
        return (to_signed(a, bits) >> (b & (bits - 1))) & mask
    return None


def _from32(ulo: int, uhi: int, tv: int, tm: int) -> Reg:
    """A 64-bit register holding a zero-extended 32-bit result."""
    r = Reg.unknown()
    r.umin, r.umax = ulo, uhi
    r.smin, r.smax = ulo, uhi
    r.tv, r.tm = tv & U32, tm & U32
    if not r.sync():
        r = Reg.unknown()
        r.set_urange(0, U32)
    return r


def _operands(dst: Reg, src: Reg, bits: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    if bits == 64:
        return ((dst.umin, dst.umax, dst.smin, dst.smax, dst.tv, dst.tm),
                (src.umin, src.umax, src.smin, src.smax, src.tv, src.tm))
    return dst.sub32(), src.sub32()


def scalar_alu(op: int, dst: Reg, src: Reg, bits: int, off: int = 0) -> Reg:
    """Abstract result of ``dst op src`` (both scalars) on ``bits`` (32 or 64) bits.

    32-bit results are zero-extended to 64 bits, as BPF defines.
    """
    mask = (1 << bits) - 1
    smin_w, smax_w = (S64_MIN, S64_MAX) if bits == 64 else (S32_MIN, S32_MAX)
    (aul, auh, asl, ash, atv, atm), (bul, buh, bsl, bsh, btv, btm) = _operands(dst, src, bits)
    if atm == 0 and btm == 0:
        v = _exact(op, atv, btv, bits, off)
        if v is not None:
            return Reg.const(v)
    ul, uh, sl, sh = 0, mask, smin_w, smax_w
    tv, tm = 0, mask
    if op == Alu.ADD:
        tv, tm = tnum_add(atv, atm, btv, btm, mask)
        if auh + buh <= mask:
            ul, uh = aul + bul, auh + buh
        lo, hi = asl + bsl, ash + bsh
        if smin_w <= lo and hi <= smax_w:
            sl, sh = lo, hi
    elif op == Alu.SUB:
        tv, tm = tnum_sub(atv, atm, btv, btm, mask)
        if aul >= buh:
            ul, uh = aul - buh, auh - bul
        lo, hi = asl - bsh, ash - bsl
        if smin_w <= lo and hi <= smax_w:
            sl, sh = lo, hi
    elif op == Alu.MUL:
        if auh * buh <= mask:
            ul, uh = aul * bul, auh * buh
            tv, tm = tnum_range(ul, uh, bits)
        prods = (asl * bsl, asl * bsh, ash * bsl, ash * bsh)
        if smin_w <= min(prods) and max(prods) <= smax_w:
            sl, sh = min(prods), max(prods)
    elif op == Alu.AND:
        tv, tm = tnum_and(atv, atm, btv, btm)
        ul, uh = tv, min(auh, buh, tv | tm)
        if asl >= 0 or bsl >= 0:
            sl, sh = 0, min(ash if asl >= 0 else smax_w, bsh if bsl >= 0 else smax_w)
    elif op == Alu.OR:
        tv, tm = tnum_or(atv, atm, btv, btm)
        ul, uh = max(aul, bul, tv), tv | tm
    elif op == Alu.XOR:
        tv, tm = tnum_xor(atv, atm, btv, btm)
        ul, uh = tv, tv | tm
    elif op in (Alu.LSH, Alu.RSH, Alu.ARSH) and btm == 0 and btv < bits:
        k = btv
        if op == Alu.LSH:
            tv, tm = (atv << k) & mask, (atm << k) & mask
            if auh << k <= mask:
                ul, uh = aul << k, auh << k
            else:
                ul, uh = tv, tv | tm
        elif op == Alu.RSH:
            tv, tm = atv >> k, atm >> k
            ul, uh = aul >> k, auh >> k
        else:
            sl, sh = asl >> k, ash >> k
            # arithmetic shift of the tnum: sign bit unknown -> top bits unknown
            sv = to_signed(atv, bits) >> k
            sm = to_signed(atm, bits) >> k if atm >> (bits - 1) else atm >> k
            tv, tm = sv & mask, sm & mask
            tv &= ~tm
    elif op == Alu.DIV and btm == 0 and btv != 0 and off == 0:
        ul, uh = aul // btv, auh // btv
        tv, tm = tnum_range(ul, uh, bits)
    elif op == Alu.MOD and btm == 0 and btv != 0 and off == 0:
        if auh < btv:
            ul, uh, tv, tm = aul, auh, atv, atm
        else:
            ul, uh = 0, btv - 1
            tv, tm = tnum_range(0, btv - 1, bits)
    if bits == 32:
        # combine unsigned and signed 32-bit views, then zero-extend
        if sl >= 0:
            ul, uh = max(ul, sl), min(uh, sh)
        elif sh < 0:
            ul, uh = max(ul, sl + (1 << 32)), min(uh, sh + (1 << 32))
        if ul > uh:
            ul, uh = 0, U32
        return _from32(ul, uh, tv, tm)
    r = Reg.unknown()
    r.umin, r.umax, r.smin, r.smax, r.tv, r.tm = ul, uh, sl, sh, tv & mask, tm & mask
    if not r.sync():
        r = Reg.unknown()
    return r


def scalar_neg(dst: Reg, bits: int) -> Reg:
    """Abstract ``-dst``."""
    if bits == 64:
        return Reg.const(-dst.tv) if dst.is_const else Reg.unknown()
    u = dst.sub32()
    if u[5] == 0:
        return Reg.const((-u[4]) & U32)
    return _from32(0, U32, 0, U32)


def scalar_end(dst: Reg, width: int, swap: bool, bits: int) -> Reg:
    """Abstract result of ``le``/``be``/``bswap`` to ``width`` bits."""
    mask = (1 << width) - 1
    if dst.is_const:
        v = dst.tv & mask
        if swap:
            v = int.from_bytes(v.to_bytes(width // 8, "little"), "big")
        return Reg.const(v)
    if not swap:
        if width == 64:
            return dst.copy()
        if dst.umax <= mask:
            return dst.copy()
    r = Reg.unknown()
    if width < 64:
        r.set_urange(0, mask)
    return r


def sign_extend(dst: Reg, width: int, bits: int) -> Reg:
    """``movsx``: sign-extend the low ``width`` bits (result on ``bits`` bits)."""
    if dst.is_const:
        v = to_signed(dst.tv, width)
        return Reg.const(v & ((1 << bits) - 1))
    lo, hi = -(1 << (width - 1)), (1 << (width - 1)) - 1
    src_lo, src_hi = dst.umin, dst.umax
    r = Reg.unknown()
    if src_hi <= hi:  # non-negative values keep their range
        if bits == 64:
            r.umin, r.umax, r.smin, r.smax = src_lo, src_hi, src_lo, src_hi
            r.tv, r.tm = tnum_range(src_lo, src_hi)
            r.sync()
        else:
            r = _from32(src_lo, src_hi, *tnum_range(src_lo, src_hi, 32))
        return r
    if bits == 64:
        r.smin, r.smax = lo, hi
        r.sync()
        return r
    return _from32(0, U32, 0, U32)


# ---------------------------------------------------------------------------- branches

_FLIP: dict[int, Jmp] = {  # a op b  <=>  b flip(op) a
    Jmp.JEQ: Jmp.JEQ, Jmp.JNE: Jmp.JNE, Jmp.JSET: Jmp.JSET,
    Jmp.JGT: Jmp.JLT, Jmp.JLT: Jmp.JGT, Jmp.JGE: Jmp.JLE, Jmp.JLE: Jmp.JGE,
    Jmp.JSGT: Jmp.JSLT, Jmp.JSLT: Jmp.JSGT, Jmp.JSGE: Jmp.JSLE, Jmp.JSLE: Jmp.JSGE,
}
_NEG: dict[int, Jmp] = {
    Jmp.JEQ: Jmp.JNE, Jmp.JNE: Jmp.JEQ,
    Jmp.JGT: Jmp.JLE, Jmp.JLE: Jmp.JGT, Jmp.JGE: Jmp.JLT, Jmp.JLT: Jmp.JGE,
    Jmp.JSGT: Jmp.JSLE, Jmp.JSLE: Jmp.JSGT, Jmp.JSGE: Jmp.JSLT, Jmp.JSLT: Jmp.JSGE,
}


def _view(r: Reg, bits: int) -> tuple[int, int, int, int, int, int]:
    if bits == 64:
        return r.umin, r.umax, r.smin, r.smax, r.tv, r.tm
    return r.sub32()


def is_taken(op: int, a: Reg, b: Reg, bits: int) -> bool | None:
    """``True``/``False`` when the comparison's outcome is known, else ``None``."""
    aul, auh, asl, ash, atv, atm = _view(a, bits)
    bul, buh, bsl, bsh, btv, btm = _view(b, bits)
    if op == Jmp.JEQ or op == Jmp.JNE:
        eq: bool | None = None
        if atm == 0 and btm == 0:
            eq = atv == btv
        elif auh < bul or buh < aul or ash < bsl or bsh < asl or tnum_intersect(atv, atm, btv, btm) is None:
            eq = False
        if eq is None:
            return None
        return eq if op == Jmp.JEQ else not eq
    if op == Jmp.JSET:
        if atv & btv:
            return True
        if not ((atv | atm) & (btv | btm)):
            return False
        return None
    if op == Jmp.JGT:
        return True if aul > buh else False if auh <= bul else None
    if op == Jmp.JGE:
        return True if aul >= buh else False if auh < bul else None
    if op == Jmp.JLT:
        return True if auh < bul else False if aul >= buh else None
    if op == Jmp.JLE:
        return True if auh <= bul else False if aul > buh else None
    if op == Jmp.JSGT:
        return True if asl > bsh else False if ash <= bsl else None
    if op == Jmp.JSGE:
        return True if asl >= bsh else False if ash < bsl else None
    if op == Jmp.JSLT:
        return True if ash < bsl else False if asl >= bsh else None
    if op == Jmp.JSLE:
        return True if ash <= bsl else False if asl > bsh else None
    return None


def _narrow64(a: Reg, op: int, b: Reg) -> Reg | None:
    """``a`` restricted to values for which ``a op b`` holds for some value of ``b``."""
    r = a.copy()
    if op == Jmp.JEQ:
        t = tnum_intersect(r.tv, r.tm, b.tv, b.tm)
        if t is None:
            return None
        r.tv, r.tm = t
        r.umin, r.umax = max(r.umin, b.umin), min(r.umax, b.umax)
        r.smin, r.smax = max(r.smin, b.smin), min(r.smax, b.smax)
    elif op == Jmp.JNE:
        if b.is_const:
            v, sv = b.tv, to_signed(b.tv)
            if r.umin == v:
                r.umin += 1
            if r.umax == v:
                r.umax -= 1
            if r.smin == sv:
                r.smin += 1
            if r.smax == sv:
                r.smax -= 1
    elif op == Jmp.JSET:
        pass
    elif op == Jmp.JGT:
        r.umin = max(r.umin, b.umin + 1)
    elif op == Jmp.JGE:
        r.umin = max(r.umin, b.umin)
    elif op == Jmp.JLT:
        r.umax = min(r.umax, b.umax - 1)
    elif op == Jmp.JLE:
        r.umax = min(r.umax, b.umax)
    elif op == Jmp.JSGT:
        r.smin = max(r.smin, b.smin + 1)
    elif op == Jmp.JSGE:
        r.smin = max(r.smin, b.smin)
    elif op == Jmp.JSLT:
        r.smax = min(r.smax, b.smax - 1)
    elif op == Jmp.JSLE:
        r.smax = min(r.smax, b.smax)
    if r.umin > r.umax or r.smin > r.smax:
        return None
    if not r.sync():
        return None
    return r


def _jset_false(a: Reg, b: Reg) -> Reg | None:
    if not b.is_const:
        return a.copy()
    r = a.copy()
    r.tv &= ~b.tv
    r.tm &= ~b.tv
    if not r.sync():
        return None
    return r


def _as64_of32(r: Reg) -> Reg:
    """A 64-bit register whose value set is the 32-bit view of ``r``."""
    ulo, uhi, slo, shi, tv, tm = r.sub32()
    out = Reg.unknown()
    out.umin, out.umax, out.tv, out.tm = ulo, uhi, tv, tm
    out.smin, out.smax = ulo, uhi
    return out


def _narrow32(a: Reg, op: int, b: Reg) -> Reg | None:
    """Narrow ``a`` by a 32-bit comparison; applied to 64 bits when ``a``'s
    upper half is known (zero-extended or sign-extended values)."""
    ulo, uhi, slo, shi, tv, tm = a.sub32()
    bu = b.sub32()
    if op in (Jmp.JSGT, Jmp.JSGE, Jmp.JSLT, Jmp.JSLE):
        # signed 32-bit compare
        lo, hi = slo, shi
        if op == Jmp.JSGT:
            lo = max(lo, bu[2] + 1)
        elif op == Jmp.JSGE:
            lo = max(lo, bu[2])
        elif op == Jmp.JSLT:
            hi = min(hi, bu[3] - 1)
        else:
            hi = min(hi, bu[3])
        if lo > hi:
            return None
        r = a.copy()
        if a.umax <= U32 and lo >= 0:
            r.umin, r.umax = max(r.umin, lo), min(r.umax, hi)
        elif S32_MIN <= a.smin and a.smax <= S32_MAX:
            r.smin, r.smax = max(r.smin, lo), min(r.smax, hi)
        elif a.umax <= U32 and hi < 0:
            r.umin, r.umax = max(r.umin, lo + (1 << 32)), min(r.umax, hi + (1 << 32))
        if r.umin > r.umax or r.smin > r.smax or not r.sync():
            return None
        return r
    a32 = _as64_of32(a)
    b32 = _as64_of32(b)
    n = _narrow64(a32, op, b32) if op != Jmp.JSET else a32
    if n is None:
        return None
    r = a.copy()
    if a.umax <= U32:
        r.umin, r.umax = max(r.umin, n.umin), min(r.umax, n.umax)
        t = tnum_intersect(r.tv, r.tm, n.tv, n.tm)
        if t is None:
            return None
        r.tv, r.tm = t
    elif S32_MIN <= a.smin and a.smax <= S32_MAX and n.umax <= S32_MAX:
        # negative values are out: the 32-bit compare kept only non-negative ones
        r.smin, r.smax = max(r.smin, n.umin), min(r.smax, n.umax)
    if r.umin > r.umax or r.smin > r.smax or not r.sync():
        return None
    return r


def branch(op: int, a: Reg, b: Reg, bits: int, taken: bool) -> tuple[Reg, Reg] | None:
    """Narrow scalars ``a`` and ``b`` assuming ``a op b`` is ``taken``;
    ``None`` when that is impossible."""
    if not taken:
        if op == Jmp.JSET:
            if bits == 64:
                na = _jset_false(a, b)
                return None if na is None else (na, b)
            return a, b
        op = _NEG[op]
    if op == Jmp.JSET:
        return a, b
    narrow = _narrow64 if bits == 64 else _narrow32
    na = narrow(a, op, b)
    if na is None:
        return None
    nb = narrow(b, _FLIP[op], na)
    if nb is None:
        return None
    return na, nb

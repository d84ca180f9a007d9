"""Abstract values and states of the emulator's verifier.

A register holds a :class:`Reg`: its type (:class:`T`), a fixed offset for
pointers, and for scalars (and for the variable part of a pointer's offset)
an over-approximation of the possible 64-bit values as unsigned bounds, signed
bounds and a *tnum* (known bits: ``value`` where ``mask`` is 0). All
arithmetic here is on Python ints: unsigned values in ``[0, 2**64)``, signed
in ``[-2**63, 2**63)``.

A :class:`Frame` is one function's registers and stack; a :class:`VState` is
the call stack of frames plus the acquired references (ringbuf records). The
functions :func:`regsafe`/:func:`states_safe` decide whether an explored state
covers the current one (state pruning) and :func:`states_exact` whether two
are identical (infinite-loop detection).
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .core import MapInfo

U64 = (1 << 64) - 1
U32 = (1 << 32) - 1
S64_MIN = -(1 << 63)
S64_MAX = (1 << 63) - 1
S32_MIN = -(1 << 31)
S32_MAX = (1 << 31) - 1
MAX_BPF_STACK = 512
#: ``BPF_MAX_VAR_OFF``: larger variable offsets are "unbounded".
MAX_VAR_OFF = 1 << 29


class T(enum.IntEnum):
    """Register types (the kernel's ``enum bpf_reg_type``, the subset modelled)."""

    NOT_INIT = 0
    SCALAR = 1
    PTR_TO_CTX = 2
    PTR_TO_STACK = 3
    PTR_TO_MAP_VALUE = 4
    CONST_PTR_TO_MAP = 5
    PTR_TO_MEM = 6  # ringbuf record / helper memory
    PTR_TO_BTF_ID = 7
    PTR_TO_FUNC = 8
    PTR_TO_MAP_KEY = 9


TYPE_NAMES = {
    T.NOT_INIT: "?",
    T.SCALAR: "scalar",
    T.PTR_TO_CTX: "ctx",
    T.PTR_TO_STACK: "fp",
    T.PTR_TO_MAP_VALUE: "map_value",
    T.CONST_PTR_TO_MAP: "map_ptr",
    T.PTR_TO_MEM: "mem",
    T.PTR_TO_BTF_ID: "ptr_",
    T.PTR_TO_FUNC: "func",
    T.PTR_TO_MAP_KEY: "map_key",
}


def to_signed(v: int, bits: int = 64) -> int:
    """Two's complement reading of the low ``bits`` of ``v``."""
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


# --------------------------------------------------------------------------- tnum

def tnum_range(lo: int, hi: int, bits: int = 64) -> tuple[int, int]:
    """Smallest tnum containing every value of the unsigned range ``[lo, hi]``."""
    chi = lo ^ hi
    n = chi.bit_length()
    if n >= bits:
        return 0, (1 << bits) - 1
    delta = (1 << n) - 1
    return lo & ~delta, delta


def tnum_add(av: int, am: int, bv: int, bm: int, mask: int = U64) -> tuple[int, int]:
    sm = am + bm
    sv = av + bv
    sigma = sm + sv
    chi = sigma ^ sv
    mu = (chi | am | bm) & mask
    return sv & ~mu & mask, mu


def tnum_sub(av: int, am: int, bv: int, bm: int, mask: int = U64) -> tuple[int, int]:
    dv = av - bv
    alpha = dv + am
    beta = dv - bm
    chi = alpha ^ beta
    mu = (chi | am | bm) & mask
    return dv & ~mu & mask, mu


def tnum_and(av: int, am: int, bv: int, bm: int) -> tuple[int, int]:
    alpha = av | am
    beta = bv | bm
    v = av & bv
    return v, alpha & beta & ~v


def tnum_or(av: int, am: int, bv: int, bm: int) -> tuple[int, int]:
    v = av | bv
    mu = am | bm
    return v, mu & ~v


def tnum_xor(av: int, am: int, bv: int, bm: int) -> tuple[int, int]:
    v = av ^ bv
    mu = am | bm
    return v & ~mu, mu


def tnum_intersect(av: int, am: int, bv: int, bm: int) -> tuple[int, int] | None:
    """Intersection, or ``None`` when the known bits disagree (no common value)."""
    if (av ^ bv) & ~(am | bm):
        return None
    v = av | bv
    mu = am & bm
    return v & ~mu, mu


# --------------------------------------------------------------------------- registers

class Reg:
    """One register's abstract value.

    ``umin..umax``, ``smin..smax`` and the tnum ``(tv, tm)`` describe a
    scalar's value or a pointer's variable offset; ``off`` is a pointer's
    fixed offset. ``map`` is the map a map pointer/value points into, ``size``
    the size of the memory behind ``PTR_TO_MEM``, ``id`` ties copies of a
    maybe-null pointer together (null checks refine all of them), ``ref`` the
    acquired reference a ringbuf record holds, ``frame`` the call frame a stack
    pointer points into.
    """

    __slots__ = ("type", "off", "umin", "umax", "smin", "smax", "tv", "tm", "null", "map", "size", "id",
                 "ref", "frame", "rdonly", "btf", "subprog")

    def __init__(self, type: T = T.NOT_INIT) -> None:
        self.type = type
        self.off = 0
        self.umin = 0
        self.umax = U64
        self.smin = S64_MIN
        self.smax = S64_MAX
        self.tv = 0
        self.tm = U64
        self.null = False
        self.map: MapInfo | None = None
        self.size = 0
        self.id = 0
        self.ref = 0
        self.frame = 0
        self.rdonly = False
        self.btf: str | None = None
        self.subprog = -1

    # -- constructors
    @staticmethod
    def unknown() -> Reg:
        return Reg(T.SCALAR)

    @staticmethod
    def const(v: int) -> Reg:
        r = Reg(T.SCALAR)
        r.set_const(v)
        return r

    @staticmethod
    def ptr(type: T, off: int = 0) -> Reg:
        r = Reg(type)
        r.set_const(0)
        r.off = off
        return r

    def copy(self) -> Reg:
        r = Reg.__new__(Reg)
        r.type = self.type
        r.off = self.off
        r.umin = self.umin
        r.umax = self.umax
        r.smin = self.smin
        r.smax = self.smax
        r.tv = self.tv
        r.tm = self.tm
        r.null = self.null
        r.map = self.map
        r.size = self.size
        r.id = self.id
        r.ref = self.ref
        r.frame = self.frame
        r.rdonly = self.rdonly
        r.btf = self.btf
        r.subprog = self.subprog
        return r

    # -- value part
    def set_const(self, v: int) -> None:
        v &= U64
        self.umin = self.umax = v
        self.smin = self.smax = to_signed(v)
        self.tv, self.tm = v, 0

    def set_urange(self, lo: int, hi: int) -> None:
        self.umin, self.umax = lo, hi
        self.smin, self.smax = S64_MIN, S64_MAX
        self.tv, self.tm = tnum_range(lo, hi)
        self.sync()

    @property
    def is_const(self) -> bool:
        return self.tm == 0

    @property
    def is_null_const(self) -> bool:
        return self.type == T.SCALAR and self.tm == 0 and self.tv == 0

    @property
    def fully_unknown(self) -> bool:
        return (self.umin == 0 and self.umax == U64 and self.smin == S64_MIN and self.smax == S64_MAX
                and self.tm == U64)

    def sync(self) -> bool:
        """Tighten bounds against each other; ``False`` when they became empty."""
        for _ in range(2):
            # tnum -> bounds
            self.umin = max(self.umin, self.tv)
            self.umax = min(self.umax, self.tv | self.tm)
            if not (self.tm >> 63):
                sv = to_signed(self.tv)
                hi = to_signed(self.tv | self.tm)
                lo, hi = (sv, hi) if sv <= hi else (hi, sv)
                self.smin = max(self.smin, lo)
                self.smax = min(self.smax, hi)
            # signed <-> unsigned
            if self.smin >= 0:
                self.umin = max(self.umin, self.smin)
                self.umax = min(self.umax, self.smax)
            elif self.smax < 0:
                self.umin = max(self.umin, self.smin + (1 << 64))
                self.umax = min(self.umax, self.smax + (1 << 64))
            if self.umax <= S64_MAX:
                self.smin = max(self.smin, self.umin)
                self.smax = min(self.smax, self.umax)
            elif self.umin > S64_MAX:
                self.smin = max(self.smin, self.umin - (1 << 64))
                self.smax = min(self.smax, self.umax - (1 << 64))
            if self.umin > self.umax or self.smin > self.smax:
                return False
            t = tnum_intersect(self.tv, self.tm, *tnum_range(self.umin, self.umax))
            if t is None:
                return False
            self.tv, self.tm = t
        return True

    # -- 32-bit view
    def sub32(self) -> tuple[int, int, int, int, int, int]:
        """``(u32min, u32max, s32min, s32max, tv32, tm32)`` of the low 32 bits."""
        tv, tm = self.tv & U32, self.tm & U32
        if self.umax <= U32:
            ulo, uhi = self.umin, self.umax
        elif self.umin >> 32 == self.umax >> 32:
            ulo, uhi = self.umin & U32, self.umax & U32
        else:
            ulo, uhi = tv, tv | tm
        if S32_MIN <= self.smin and self.smax <= S32_MAX:
            slo, shi = self.smin, self.smax
        elif uhi <= S32_MAX:
            slo, shi = ulo, uhi
        elif ulo > S32_MAX:
            slo, shi = ulo - (1 << 32), uhi - (1 << 32)
        else:
            slo, shi = S32_MIN, S32_MAX
        # the signed view constrains the unsigned one too
        if slo >= 0:
            ulo, uhi = max(ulo, slo), min(uhi, shi)
        elif shi < 0:
            ulo, uhi = max(ulo, slo + (1 << 32)), min(uhi, shi + (1 << 32))
        return ulo, uhi, slo, shi, tv, tm

    def describe(self) -> str:
        """Kernel-log-like text (``scalar(umin=0,umax=9)``, ``fp-8``, ``map_value(off=0,ks=4,vs=8)``)."""
        t = self.type
        if t == T.NOT_INIT:
            return "?"
        if t == T.SCALAR:
            if self.is_const:
                return str(to_signed(self.tv)) if self.smin < 0 else str(self.tv)
            if self.fully_unknown:
                return "scalar()"
            parts = []
            if self.smin != S64_MIN:
                parts.append(f"smin={self.smin}")
            if self.smax != S64_MAX:
                parts.append(f"smax={self.smax}")
            if self.umin != 0:
                parts.append(f"umin={self.umin}")
            if self.umax != U64:
                parts.append(f"umax={self.umax}")
            if self.tm != U64:
                parts.append(f"var_off=({self.tv:#x}; {self.tm:#x})")
            return f"scalar({','.join(parts)})"
        name = type_name(self)
        if t == T.PTR_TO_STACK:
            return f"fp{self.off}" if self.is_const else f"fp(off={self.off},var_off=({self.tv:#x}; {self.tm:#x}))"
        extra = [f"off={self.off}"] if self.off else []
        if not self.is_const:
            extra.append(f"var_off=({self.tv:#x}; {self.tm:#x})")
        if t in (T.PTR_TO_MAP_VALUE, T.CONST_PTR_TO_MAP) and self.map is not None:
            extra.append(f"ks={self.map.key_size},vs={self.map.value_size}")
        if t == T.PTR_TO_MEM:
            extra.append(f"sz={self.size}")
        return f"{name}({','.join(extra)})"


def type_name(r: Reg) -> str:
    """The kernel's name for a register type (``map_value_or_null``, ``ringbuf_mem``, …)."""
    t = r.type
    if t == T.PTR_TO_MEM:
        base = "ringbuf_mem" if r.ref else "mem"
    elif t == T.PTR_TO_BTF_ID:
        base = f"ptr_{r.btf}" if r.btf else "ptr_"
    else:
        base = TYPE_NAMES[t]
    return f"{base}_or_null" if r.null else base


NOT_INIT = Reg()


# --------------------------------------------------------------------------- stack

class Slot:
    """One 8-byte stack slot: a type per byte (``?`` never written, ``m``
    data, ``z`` zero, ``s`` spilled register) and the spilled register."""

    __slots__ = ("bytes", "spill", "spill_size")

    def __init__(self, bytes_: str = "????????", spill: Reg | None = None, spill_size: int = 0) -> None:
        self.bytes = bytes_
        self.spill = spill
        self.spill_size = spill_size


EMPTY_SLOT = Slot()


class Frame:
    """One function's registers and stack."""

    __slots__ = ("regs", "stack", "callsite", "subprog", "frameno", "is_callback", "cb_ret_insn")

    def __init__(self, frameno: int, subprog: int, callsite: int) -> None:
        self.regs: list[Reg] = [NOT_INIT] * 11
        self.stack: dict[int, Slot] = {}
        self.callsite = callsite
        self.subprog = subprog
        self.frameno = frameno
        self.is_callback = False
        self.cb_ret_insn = -1

    def copy(self) -> Frame:
        f = Frame.__new__(Frame)
        f.regs = list(self.regs)  # Reg objects are never mutated in place after being shared
        f.stack = dict(self.stack)
        f.callsite = self.callsite
        f.subprog = self.subprog
        f.frameno = self.frameno
        f.is_callback = self.is_callback
        f.cb_ret_insn = self.cb_ret_insn
        return f


class VState:
    """A verifier state: call frames (innermost last) and held references."""

    __slots__ = ("frames", "refs", "parent", "branches", "insn", "last_cp_processed", "hit", "miss")

    def __init__(self) -> None:
        self.frames: list[Frame] = []
        self.refs: dict[int, int] = {}  # ref id -> insn that acquired it
        self.parent: VState | None = None
        self.branches = 0
        self.insn = -1
        self.last_cp_processed = 0
        self.hit = 0
        self.miss = 0

    @property
    def cur(self) -> Frame:
        return self.frames[-1]

    def copy(self) -> VState:
        s = VState.__new__(VState)
        s.frames = [f.copy() for f in self.frames]
        s.refs = dict(self.refs)
        s.parent = self.parent
        s.branches = 0
        s.insn = self.insn
        s.last_cp_processed = self.last_cp_processed
        s.hit = s.miss = 0
        return s


# --------------------------------------------------------------------------- comparison

def _range_within(old: Reg, cur: Reg) -> bool:
    if old.tm == U64 and old.umin == 0 and old.umax == U64 and old.smin == S64_MIN and old.smax == S64_MAX:
        return True
    return (old.umin <= cur.umin and cur.umax <= old.umax and old.smin <= cur.smin and cur.smax <= old.smax
            and not (cur.tm & ~old.tm) and (cur.tv & ~old.tm) == old.tv)


class IdMap:
    """Consistent renaming of pointer ids between an old and a current state."""

    __slots__ = ("fwd", "back")

    def __init__(self) -> None:
        self.fwd: dict[int, int] = {}
        self.back: dict[int, int] = {}

    def check(self, old: int, cur: int) -> bool:
        if old == 0 and cur == 0:
            return True
        if old == 0 or cur == 0:
            return False
        a = self.fwd.get(old)
        b = self.back.get(cur)
        if a is None and b is None:
            self.fwd[old] = cur
            self.back[cur] = old
            return True
        return a == cur and b == old


def regsafe(old: Reg, cur: Reg, ids: IdMap) -> bool:
    """Whether everything proven safe with ``old`` is also safe with ``cur``."""
    if old.type == T.NOT_INIT:
        return True
    if cur.type != old.type:
        return False
    if old.type == T.SCALAR:
        return _range_within(old, cur)
    if old.off != cur.off or old.null != cur.null or old.map is not cur.map or old.size != cur.size:
        return False
    if old.frame != cur.frame or old.rdonly != cur.rdonly or old.btf != cur.btf or old.subprog != cur.subprog:
        return False
    if not _range_within(old, cur):
        return False
    if (old.null or cur.null or old.id or cur.id) and not ids.check(old.id, cur.id):
        return False
    return ids.check(old.ref, cur.ref) if (old.ref or cur.ref) else True


def reg_exact(a: Reg, b: Reg) -> bool:
    """Bit-for-bit equal abstract values (ids compared as they are)."""
    return (a.type == b.type and a.off == b.off and a.umin == b.umin and a.umax == b.umax and a.smin == b.smin
            and a.smax == b.smax and a.tv == b.tv and a.tm == b.tm and a.null == b.null and a.map is b.map
            and a.size == b.size and a.frame == b.frame and a.ref == b.ref)


def _slot_safe(old: Slot, cur: Slot, ids: IdMap) -> bool:
    for i in range(8):
        ob, cb = old.bytes[i], cur.bytes[i]
        if ob == "?":
            continue
        if ob == "m":
            if cb == "?":
                return False
            if cb == "s" and cur.spill is not None and cur.spill.type != T.SCALAR:
                return False
            continue
        if ob == "z":
            if cb == "z":
                continue
            if cb == "s" and cur.spill is not None and cur.spill.is_null_const:
                continue
            return False
        # ob == "s"
        if cb != "s":
            if old.spill is not None and old.spill.type == T.SCALAR and old.spill.fully_unknown and cb in "mz":
                continue
            return False
    if "s" in old.bytes and old.spill is not None:
        if cur.spill is None or cur.spill_size != old.spill_size:
            if old.spill.type == T.SCALAR and old.spill.fully_unknown:
                return True
            return False
        return regsafe(old.spill, cur.spill, ids)
    return True


def frame_safe(old: Frame, cur: Frame, live: int, ids: IdMap) -> bool:
    """``live`` is a bitmask of registers that matter (bit i: register i)."""
    if old.callsite != cur.callsite or old.subprog != cur.subprog:
        return False
    oregs, cregs = old.regs, cur.regs
    for i in range(10):
        if live >> i & 1 and not regsafe(oregs[i], cregs[i], ids):
            return False
    for k, oslot in old.stack.items():
        cslot = cur.stack.get(k, EMPTY_SLOT)
        if oslot is cslot:
            continue
        if not _slot_safe(oslot, cslot, ids):
            return False
    return True


def states_safe(old: VState, cur: VState, live_inner: int) -> bool:
    """Whether the explored state ``old`` covers ``cur`` (state pruning)."""
    if len(old.frames) != len(cur.frames) or len(old.refs) != len(cur.refs):
        return False
    ids = IdMap()
    n = len(old.frames)
    for i in range(n):
        live = live_inner if i == n - 1 else 0x3FF
        if not frame_safe(old.frames[i], cur.frames[i], live, ids):
            return False
    return all(ids.fwd.get(r, r) in cur.refs for r in old.refs)


def states_exact(a: VState, b: VState, live_inner: int) -> bool:
    """Whether two states are identical (used to detect infinite loops)."""
    if len(a.frames) != len(b.frames) or a.refs.keys() != b.refs.keys():
        return False
    n = len(a.frames)
    for i in range(n):
        fa, fb = a.frames[i], b.frames[i]
        if fa.callsite != fb.callsite:
            return False
        live = live_inner if i == n - 1 else 0x3FF
        for r in range(10):
            if live >> r & 1 and not reg_exact(fa.regs[r], fb.regs[r]):
                return False
        keys = fa.stack.keys() | fb.stack.keys()
        for k in keys:
            sa, sb = fa.stack.get(k, EMPTY_SLOT), fb.stack.get(k, EMPTY_SLOT)
            if sa is sb:
                continue
            if sa.bytes != sb.bytes or sa.spill_size != sb.spill_size:
                return False
            if (sa.spill is None) != (sb.spill is None):
                return False
            if sa.spill is not None and sb.spill is not None and not reg_exact(sa.spill, sb.spill):
                return False
    return True

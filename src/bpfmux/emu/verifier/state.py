"""Verifier states and their comparison.

A :class:`Frame` is one function's registers and stack; a :class:`VState`
is the call stack of frames plus the acquired references (ringbuf records),
and the bookkeeping of the exploration: the explored state it was forked or
continued from (``parent``), how many paths below an explored state are
still being explored (``branches``), the jumps taken since the last explored
state (``hist``, read by precision backtracking) and the loop it belongs to
(``loop_entry``).

:func:`states_equal` decides whether an explored state covers the current
one, with the kernel's three levels: ``NOT_EXACT`` (what pruning uses:
registers not read later, and scalars whose exact value no decision
depended on, need not match), ``RANGE_WITHIN`` (every register's range must
contain the current one) and ``EXACT`` (infinite-loop detection).

The stack is kept per 8-byte slot: a type per byte (``?`` never written,
``m`` data, ``z`` zero, ``s`` part of a spilled register; byte 0 is the
lowest address) and the spilled register.
"""

from __future__ import annotations

from .reg import ADD_CONST, NOT_INIT, Reg, T
from .tnum import U64

__all__ = ["EMPTY_SLOT", "EXACT", "MAX_BPF_STACK", "MAX_VAR_OFF", "NOT_EXACT", "RANGE_WITHIN", "Frame", "IdMap",
           "Slot", "VState", "maybe_looping", "regsafe", "states_equal"]

MAX_BPF_STACK = 512
#: ``BPF_MAX_VAR_OFF``: larger variable offsets are "unbounded".
MAX_VAR_OFF = 1 << 29

NOT_EXACT, EXACT, RANGE_WITHIN = 0, 1, 2

_SCALAR = T.SCALAR
_NOT_INIT = T.NOT_INIT


class Slot:
    """One 8-byte stack slot: byte types and the spilled register (immutable once shared)."""

    __slots__ = ("bytes", "spill")

    def __init__(self, bytes_: str = "????????", spill: Reg | None = None) -> None:
        self.bytes = bytes_
        self.spill = spill

    @property
    def spilled64(self) -> bool:
        """A whole 8-byte spilled register."""
        return self.bytes == "ssssssss" and self.spill is not None

    @property
    def spilled(self) -> bool:
        """Holds a spilled register (the kernel looks at the slot's last byte)."""
        return self.bytes[0] == "s" and self.spill is not None


EMPTY_SLOT = Slot()
_UNBOUND = Reg.unknown()


class Frame:
    """One function's registers and stack (stack keyed by slot number: 0 is fp-8..fp-1)."""

    __slots__ = ("regs", "stack", "callsite", "subprog", "frameno", "is_callback", "cb_ret", "callback_depth",
                 "async_entry")

    def __init__(self, frameno: int, subprog: int, callsite: int) -> None:
        self.regs: list[Reg] = [NOT_INIT] * 11
        self.stack: dict[int, Slot] = {}
        self.callsite = callsite
        self.subprog = subprog
        self.frameno = frameno
        self.is_callback = False
        self.cb_ret = (0, 0)
        self.callback_depth = 0
        self.async_entry = 0

    def copy(self) -> Frame:
        """A copy sharing the (never changed in place) registers and slots."""
        f = Frame.__new__(Frame)
        f.regs = list(self.regs)
        f.stack = dict(self.stack)
        f.callsite = self.callsite
        f.subprog = self.subprog
        f.frameno = self.frameno
        f.is_callback = self.is_callback
        f.cb_ret = self.cb_ret
        f.callback_depth = self.callback_depth
        f.async_entry = self.async_entry
        return f


class VState:
    """A verifier state (see the module docstring)."""

    __slots__ = ("frames", "refs", "parent", "branches", "insn", "first_insn", "last_insn", "hist", "hit", "miss",
                 "may_goto_depth", "callback_unroll_depth", "dfs_depth", "loop_entry", "used_as_loop_entry",
                 "live_done")

    def __init__(self) -> None:
        self.frames: list[Frame] = []
        self.refs: dict[int, tuple[int, int]] = {}  # ref id -> (insn that acquired it, its frame)
        self.parent: VState | None = None
        self.branches = 1
        self.insn = -1
        self.first_insn = 0
        self.last_insn = -1
        #: jumps since the last explored state: (insn, previous insn, flags, linked registers)
        self.hist: list[list] = []
        self.hit = 0
        self.miss = 0
        self.may_goto_depth = 0
        self.callback_unroll_depth = 0
        self.dfs_depth = 0
        self.loop_entry: VState | None = None
        self.used_as_loop_entry = False
        self.live_done = False

    @property
    def cur(self) -> Frame:
        """The innermost frame."""
        return self.frames[-1]

    def copy(self) -> VState:
        """A copy for a new path (frames copied, registers and slots shared)."""
        s = VState.__new__(VState)
        s.frames = [f.copy() for f in self.frames]
        s.refs = dict(self.refs)
        s.parent = self.parent
        s.branches = self.branches
        s.insn = self.insn
        s.first_insn = self.first_insn
        s.last_insn = self.last_insn
        s.hist = [list(h) for h in self.hist]
        s.hit = s.miss = 0
        s.may_goto_depth = self.may_goto_depth
        s.callback_unroll_depth = self.callback_unroll_depth
        s.dfs_depth = self.dfs_depth
        s.loop_entry = self.loop_entry
        s.used_as_loop_entry = self.used_as_loop_entry
        s.live_done = False
        return s


# --------------------------------------------------------------------------- id maps

class IdMap:
    """Consistent renaming of ids between an old and a current state."""

    __slots__ = ("fwd", "back", "tmp")

    def __init__(self, tmp_base: int) -> None:
        self.fwd: dict[int, int] = {}
        self.back: dict[int, int] = {}
        self.tmp = tmp_base

    def check(self, old: int, cur: int) -> bool:
        """Either both ids are 0, or ``old`` maps to ``cur`` (and nothing else does)."""
        if (old == 0) != (cur == 0):
            return False
        if old == 0:
            return True
        a = self.fwd.get(old)
        if a is not None:
            return a == cur
        if cur in self.back:
            return False
        self.fwd[old] = cur
        self.back[cur] = old
        return True

    def check_scalar(self, old: int, cur: int) -> bool:
        """Scalar ids: an unlinked old register accepts anything; an unlinked
        current register counts as a fresh id of its own."""
        if not old:
            return True
        if not cur:
            self.tmp += 1
            cur = self.tmp
        if not self.check(old, cur):
            return False
        if old & ADD_CONST:
            return self.check(old & ~ADD_CONST, cur & ~ADD_CONST)
        return True


# --------------------------------------------------------------------------- registers


def _range_within(o: Reg, c: Reg) -> bool:
    return (o.umin <= c.umin and c.umax <= o.umax and o.smin <= c.smin and c.smax <= o.smax
            and o.u32min <= c.u32min and c.u32max <= o.u32max and o.s32min <= c.s32min and c.s32max <= o.s32max)


def _tnum_in(o: Reg, c: Reg) -> bool:
    return not (c.tm & ~o.tm) and (c.tv & ~o.tm) == o.tv


def _value_equal(a: Reg, b: Reg) -> bool:
    """The fields the kernel's ``regs_exact`` compares byte for byte (all but ids)."""
    return (a.type == b.type and a.off == b.off and a.tv == b.tv and a.tm == b.tm and a.umin == b.umin
            and a.umax == b.umax and a.smin == b.smin and a.smax == b.smax and a.u32min == b.u32min
            and a.u32max == b.u32max and a.s32min == b.s32min and a.s32max == b.s32max and a.null == b.null
            and a.map is b.map and a.size == b.size and a.rdonly == b.rdonly and a.btf == b.btf
            and a.subprog == b.subprog)


def _regs_exact(a: Reg, b: Reg, ids: IdMap) -> bool:
    return _value_equal(a, b) and ids.check(a.id, b.id) and ids.check(a.ref, b.ref)


def regsafe(old: Reg, cur: Reg, ids: IdMap, exact: int) -> bool:
    """Whether everything proven safe with ``old`` is safe with ``cur`` (a live register)."""
    if exact == EXACT:
        return _regs_exact(old, cur, ids)
    ot = old.type
    if ot == _NOT_INIT:
        if exact == NOT_EXACT or cur.type == _NOT_INIT:
            return True
    if ot != cur.type or old.null != cur.null:
        return False
    if ot == _SCALAR:
        if not old.precise and exact == NOT_EXACT:
            return True
        oid, cid = old.id, cur.id
        if oid & ADD_CONST and not cid & ADD_CONST:
            return False
        if oid and not oid & ADD_CONST and cid & ADD_CONST:
            return False
        if oid & ADD_CONST and old.off != cur.off:
            return False
        if not ids.check_scalar(oid, cid):
            return False
        return _range_within(old, cur) and _tnum_in(old, cur)
    if ot in (T.PTR_TO_MAP_KEY, T.PTR_TO_MAP_VALUE, T.PTR_TO_MEM):
        return (old.off == cur.off and old.map is cur.map and old.size == cur.size and old.rdonly == cur.rdonly
                and _range_within(old, cur) and _tnum_in(old, cur) and ids.check(old.id, cur.id)
                and ids.check(old.ref, cur.ref))
    if ot == T.PTR_TO_STACK:
        return _regs_exact(old, cur, ids) and old.frame == cur.frame
    return _regs_exact(old, cur, ids)


# --------------------------------------------------------------------------- stacks


def _scalar_for_stack(s: Slot) -> Reg | None:
    """A spilled 64-bit scalar, or an unknown scalar for a slot of plain data
    (never-written bytes read as data for privileged programs)."""
    if s.spilled64 and s.spill.type == _SCALAR:  # type: ignore[union-attr]  # spilled64: spill is set
        return s.spill
    if "s" not in s.bytes and "z" not in s.bytes:
        return _UNBOUND
    return None


def _stacksafe(old: Frame, cur: Frame, ids: IdMap, exact: int) -> bool:
    ostack, cstack = old.stack, cur.stack
    if exact != NOT_EXACT:
        for k in ostack.keys() | cstack.keys():
            if ostack.get(k, EMPTY_SLOT).bytes != cstack.get(k, EMPTY_SLOT).bytes:
                return False
    for k, os_ in ostack.items():
        ob = os_.bytes
        if "s" not in ob and "z" not in ob:
            continue  # never-written and data bytes: any current content is as good
        cs = cstack.get(k, EMPTY_SLOT)
        if os_ is cs:
            continue
        oreg = _scalar_for_stack(os_)
        creg = _scalar_for_stack(cs)
        if oreg is not None and creg is not None:
            if not regsafe(oreg, creg, ids, exact):
                return False
            continue
        cb = cs.bytes
        for i in range(8):
            o = ob[i]
            if o == "?" or o == "m":
                continue
            if o != cb[i]:
                return False
        if ob[0] == "s":
            if cs.spill is None or not regsafe(os_.spill, cs.spill, ids, exact):  # type: ignore[arg-type]  # 's': spilled
                return False
    return True


def _refsafe(old: VState, cur: VState, ids: IdMap) -> bool:
    if len(old.refs) != len(cur.refs):
        return False
    return all(ids.check(a, b) for a, b in zip(old.refs, cur.refs, strict=True))


def states_equal(old: VState, cur: VState, live: list[int], exact: int, tmp_base: int) -> bool:
    """Whether ``old`` covers ``cur`` at the same instruction.

    :param live: per frame (outermost first), the bit mask of live registers
        (used when ``exact`` is ``NOT_EXACT``).
    :param tmp_base: ids above every id in use (for unlinked scalars).
    """
    ofr, cfr = old.frames, cur.frames
    if len(ofr) != len(cfr):
        return False
    ids = IdMap(tmp_base)
    for i in range(len(ofr)):
        fo, fc = ofr[i], cfr[i]
        if fo.callsite != fc.callsite:
            return False
        if fo.callback_depth > fc.callback_depth:
            return False
        oregs, cregs = fo.regs, fc.regs
        mask = live[i] if exact == NOT_EXACT else 0x7FF
        for r in range(11):
            if mask >> r & 1:
                o, c = oregs[r], cregs[r]
                if o is not c and not regsafe(o, c, ids, exact):
                    return False
        if not _stacksafe(fo, fc, ids, exact):
            return False
    return _refsafe(old, cur, ids)


def maybe_looping(old: VState, cur: VState) -> bool:
    """The innermost frames' registers are bit for bit the same (ids included)."""
    if len(old.frames) != len(cur.frames):
        return False
    a, b = old.frames[-1].regs, cur.frames[-1].regs
    for i in range(11):
        x, y = a[i], b[i]
        if x is not y and not (_value_equal(x, y) and x.id == y.id and x.ref == y.ref and x.frame == y.frame):
            return False
    return True


_ = U64

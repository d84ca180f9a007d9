"""The fast tier: BPF functions translated to Python functions.

Each BPF function (the program's entry, every bpf-to-bpf call target and
callback) becomes one Python function ``F<slot>(rs, r1, r2, r3, r4, r5,
depth)`` whose registers are local variables. The function's control-flow
graph is turned back into structured code: a natural loop becomes a ``while``
loop, a forward branch an ``if``, a join point code that follows (guarded by
a "next block" variable only where several paths meet with different
targets). There is no per-instruction dispatch. A graph that cannot be
structured this way (irreducible, or nested deeper than Python allows)
falls back to a block-dispatch loop; a large one is split into segment
functions so that each stays small.

Translation time is linear in the program's size: long straight runs are
cut into blocks of at most :data:`MAX_BLOCK` instructions, an expression
nests at most :data:`MAX_FUSED` operations, the emitter recurses only where
the code nests (chains of blocks and joins are walked in a loop, with a
fall back past :data:`MAX_DEPTH` levels), lines are joined without copying
(:mod:`.pysource`), and a function body is cut into parts of about
:data:`PART_LINES` lines compiled in chunks (CPython's compiler is not linear
in the size of one function).

**Run budget.** Each function keeps the run's remaining instruction budget
(:attr:`RunState.left`) in a local: every block charges its instruction
count when it is entered (a block that always follows another is charged
with it), and loop heads and function entries check it first, so a run
stops with "run budget of N instructions exhausted" at the first loop head
or function entry after it has executed more than ``VM.run_budget``
instructions — callbacks of ``bpf_loop`` and friends included, since they
share the run's budget.

Memory accesses go straight to the region buffers: ``r10``-relative
accesses with a constant offset to the frame's ``bytearray``, others through
``space.rbufs[addr >> 32]`` / ``space.wbufs[...]`` with ``addr & 0xFFFFFFFF``
as offset. Python itself raises on an unmapped slot or an access past the
end of the buffer; :func:`convert_exception` turns that into the same
:class:`~bpfmux.errors.EmulatorFault` the checked tier raises, using the
generated code's line → slot table and the registers in the frame.

The source of a program depends only on its code and resolved constants, so
identical programs share compiled code objects (:data:`_CODE_CACHE`).
"""

from __future__ import annotations

import functools
import gc
import hashlib
import re
import struct
import sys
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...errors import BpfmuxError, EmulatorFault
from ...isa.flow import CFG, COND, EXIT, FALL, FAULT, GOTO, OUTSIDE, live_out, regs_read, regs_written
from ...isa.insn import Insn
from . import interp
from .interp import INVALID, MIDDLE_OF_LDDW, s32
from .pysource import CHARGE, JUMP, PART_ARGS, STATE, Lines, Rendered, TooDeep, render
from .runtime import MAX_CALL_FRAMES, RunState

if TYPE_CHECKING:
    from .machine import EmuProgram

M64 = 0xFFFFFFFFFFFFFFFF
M32 = 0xFFFFFFFF
S64 = 1 << 63
S32 = 1 << 31
_SIZE = {0x00: 4, 0x08: 2, 0x10: 1, 0x18: 8}
_FILE_PREFIX = "<bpf-fast "

#: Longest block the emitter works on (longer straight runs are cut).
MAX_BLOCK = 256
#: Most ALU operations folded into one expression.
MAX_FUSED = 4
#: How far ahead a single use of an ALU result is looked for.
FUSE_WINDOW = 16
#: Deepest nesting of the structured emitter before it falls back to dispatch.
MAX_DEPTH = 1000
#: Lines of one Python function (part) before the body is cut.
PART_LINES = 2000
#: Blocks of one dispatch segment.
SEGMENT_BLOCKS = 256
#: Lines compiled by one call of ``compile``.
CHUNK_LINES = 6000
#: Programs whose source has more lines are neither cached nor kept in ``_fast_source``.
CACHE_MAX_LINES = 50_000

#: filename → (line → slot, slot → (size, write) of its memory access)
_DEBUG: dict[str, tuple[list[int], dict[int, tuple[int, bool]]]] = {}
_CODE_CACHE: dict[str, types.CodeType] = {}
_CODE_CACHE_MAX = 512

_REG_RE = re.compile(r"\br(\d+)\b")
_ST = {n: struct.Struct(f) for n, f in ((1, "<B"), (2, "<H"), (4, "<I"), (8, "<Q"))}
_STS = {n: struct.Struct(f) for n, f in ((1, "<b"), (2, "<h"), (4, "<i"))}


_NONE: frozenset[int] = frozenset()
_FP = frozenset((10,))


@functools.lru_cache(maxsize=4096)
def _rw(insn: Insn | None) -> tuple[frozenset[int], frozenset[int]]:
    """Registers an instruction reads and writes as the VM runs it (r10 left out: it never changes)."""
    if insn is None:
        return _NONE, _NONE
    return regs_read(insn, abi=False) - _FP, regs_written(insn, abi=False)


_NOSET: frozenset[int] = frozenset()
_MASKS: dict[frozenset[int], int] = {}


def _mask(regs: frozenset[int]) -> int:
    """A register set as a bit mask."""
    m = _MASKS.get(regs)
    if m is None:
        m = _MASKS[regs] = sum(1 << r for r in regs)
    return m


def _rw_masks(insn: Insn | None) -> tuple[int, int]:
    reads, writes = _rw(insn)
    return _mask(reads), _mask(writes)


class _Charge:
    """A ``_b -= count`` line; ``mark`` is the translator's count of exits and
    calls when it was written (a later block may add its count only if none
    came in between)."""

    __slots__ = ("count", "mark")

    def __init__(self, count: int, mark: int) -> None:
        self.count = count
        self.mark = mark

    def __str__(self) -> str:
        return f"_b -= {self.count}"


class _RangeLoop:
    """The ``for`` line of a loop whose iterations each charge ``head``: the
    range yields the budget left after each charge and ends (into the
    ``else``: budget exhausted) when it was negative before one."""

    __slots__ = ("head",)

    def __init__(self, head: _Charge) -> None:
        self.head = head

    def __str__(self) -> str:
        c = self.head.count
        return f"for _b in range(_b - {c}, {-c - 1}, -{c}):"


class _Fallback(Exception):
    """Structured emission is impossible for this function."""


_Lines = Lines
class _Func:
    """Emits one BPF function."""

    def __init__(self, mod: _Module, entry: int) -> None:
        self.mod = mod
        self.prog = mod.prog
        self.code = mod.prog.code
        self.entry = entry
        self.slots = mod.prog.slots
        self.cfg = CFG(self.slots, entry, MAX_BLOCK)
        self.sym: dict[int, tuple[Any, ...]] = {}
        self.exit_value = "r0"
        self.live_out = live_out(self.cfg, _rw)
        self.live_after: dict[int, int] = {}
        self.fusable: set[int] | frozenset[int] = set()
        self.fuse_use: dict[int, int] = {}
        #: ``_nx`` targets some emitted line compares against (others need no ``_nx = y``)
        self.tested: set[int] = set()
        self._jumps: dict[tuple[int, int], _Lines] = {}
        #: exits, loop transfers and calls emitted so far (see :class:`_Charge`)
        self.dirty = 0
        self.folded, self.charge = self._charges()
        fwd = self.cfg.forward_preds
        #: the join points each block dominates, in reverse post-order
        self.merges: dict[int, list[int]] = {}
        for x, kids in self.cfg.children.items():
            ms = [c for c in kids if fwd[c] >= 2]
            if ms:
                self.merges[x] = ms

    def _charges(self) -> tuple[set[int], dict[int, int]]:
        """Blocks charged together with the block before them (they always
        follow it), and the instruction count each other block charges."""
        cfg = self.cfg
        folded: set[int] = set()
        for x in cfg.rpo:
            blk = cfg.blocks[x]
            if blk.term in (FALL, GOTO):
                s = blk.succs[0]
                if (s != cfg.entry and s not in cfg.headers and cfg.forward_preds.get(s, 0) == 1
                        and not cfg.is_back_edge(x, s) and cfg.blocks[s].pcs):
                    folded.add(s)
        charge: dict[int, int] = {}
        for x in reversed(cfg.rpo):
            blk = cfg.blocks[x]
            n = len(blk.pcs)
            if blk.term in (FALL, GOTO) and blk.succs[0] in folded:
                n += charge[blk.succs[0]]
            charge[x] = n
        return folded, charge

    # -- register values within a block ---------------------------------------------
    #
    # While a block is emitted, a register may hold a *pending* value instead
    # of its local variable: a copy of another register ("r", n), a constant
    # ("k", value) or the frame pointer plus an offset ("fp", off). Reads use
    # the pending value (copy and constant propagation, stack addresses
    # resolved at translation time); a write to a register first materialises
    # every pending copy of it; the block's end materialises everything.

    def v(self, r: int) -> str:
        """Expression for the current (u64) value of register ``r``."""
        sym = self.sym.get(r)
        if sym is None:
            return f"r{r}"
        kind, x = sym[0], sym[1]
        if kind == "r":
            return f"r{x}"
        if kind == "k":
            return str(x)
        if kind == "e":
            return f"({x})"
        return f"(r10 + {x})" if x >= 0 else f"(r10 - {-x})"

    def const(self, r: int) -> int | None:
        sym = self.sym.get(r)
        return sym[1] if sym is not None and sym[0] == "k" else None

    def fp_off(self, r: int) -> int | None:
        """Offset from the frame pointer when ``r`` is known to be r10 + offset."""
        if r == 10:
            return 0
        sym = self.sym.get(r)
        return sym[1] if sym is not None and sym[0] == "fp" else None

    def before_write(self, r: int, out: _Lines, ind: int, pc: int) -> None:
        """Materialise pending values that read ``r``; forget ``r``'s own."""
        for d, sym in list(self.sym.items()):
            if (sym[0] == "r" and sym[1] == r) or (sym[0] == "e" and r in sym[2]):
                if not (sym[0] == "e" and sym[3] == pc):  # consumed by this very instruction
                    out.add(ind, f"r{d} = {self.v(d)}", pc)
                del self.sym[d]
        self.sym.pop(r, None)

    def assign(self, r: int, expr: str, out: _Lines, ind: int, pc: int) -> None:
        self.before_write(r, out, ind, pc)
        out.add(ind, f"r{r} = {expr}", pc)

    def set_sym(self, r: int, sym: tuple[str, int], out: _Lines, ind: int, pc: int) -> None:
        if sym == ("r", r):
            return
        self.before_write(r, out, ind, pc)
        self.sym[r] = sym

    def flush(self, out: _Lines, ind: int, pc: int, live: frozenset[int] | None = None) -> None:
        """Materialise the pending registers in ``live`` (all by default) and
        forget the others (end of a block)."""
        for d in sorted(self.sym):
            if live is None or d in live:
                out.add(ind, f"r{d} = {self.v(d)}", pc)
        self.sym.clear()

    # -- instruction statements ------------------------------------------------

    def stmts(self, pc: int, out: _Lines, ind: int) -> None:
        """Statements of the (non-terminator part of the) instruction at ``pc``."""
        op, dst, src, off, imm = self.code[pc]
        mod = self.mod
        cls = op & 0x07
        if op == INVALID:
            out.add(ind, f"raise _BAD({pc}, {self.prog.invalid.get(pc, 'malformed')!r})", pc)
            return
        if op == MIDDLE_OF_LDDW:
            out.add(ind, f"raise _E('insn {pc}: jump into the middle of an lddw', pc={pc})", pc)
            return
        if cls in (0x04, 0x07):
            self.alu(op, dst, src, off, imm, pc, out, ind)
            return
        if cls == 0x01:  # LDX
            size = _SIZE[op & 0x18]
            signed = op & 0xE0 == 0x80
            mod.debug[pc] = (size, False)
            self.assign(dst, self.load(src, off, size, signed, pc), out, ind, pc)
            return
        if cls in (0x02, 0x03):
            size = _SIZE[op & 0x18]
            mode = op & 0xE0
            if mode == 0xC0:
                self.atomic(pc, dst, src, off, imm, size, out, ind)
                return
            mod.debug[pc] = (size, True)
            if cls == 0x03:
                k = self.const(src)
                if k is not None:
                    value = str(k & ((1 << (8 * size)) - 1))
                else:
                    value = self.v(src) if size == 8 else f"{self.v(src)} & {(1 << (8 * size)) - 1}"
            else:
                value = str((imm & M64) & ((1 << (8 * size)) - 1))
            out.add(ind, self.store(dst, off, size, value, pc), pc)
            return
        if op == 0x18:
            self.set_sym(dst, ("k", imm & M64), out, ind, pc)
            return
        if cls == 0x00:  # ld_abs / ld_ind
            size = _SIZE[op & 0x18]
            where = f"{s32(imm)}" if op & 0xE0 == 0x20 else \
                f"{s32(imm)} + ((({self.v(src)} & {M32}) ^ {S32}) - {S32})"
            out.add(ind, f"_v = _LDPKT(_rs, {pc}, {size}, {where})", pc)
            out.add(ind, "if _v is None:", pc)
            out.ret(ind + 1, "0", pc)
            self.dirty += 1
            self.assign(0, "_v", out, ind, pc)
            return
        if cls == 0x05 and op & 0xF0 == 0x80:
            self.call(pc, op, dst, src, imm, out, ind)
            return
        raise BpfmuxError(f"internal error: no statement for insn {pc} (opcode {op:#x})")  # pragma: no cover

    def alu(self, op: int, dst: int, src: int, off: int, imm: int, pc: int, out: _Lines, ind: int) -> None:
        is64 = op & 0x07 == 0x07
        o = op & 0xF0
        k = not op & 0x08
        kv = ((imm & M64) if is64 else (imm & M32)) if k else self.const(src)
        da = self.const(dst)
        # constant folding, with the interpreter's exact semantics
        if o == 0xD0 and da is not None:
            self.set_sym(dst, ("k", interp.endian(op, da, imm, pc)), out, ind, pc)
            return
        if o != 0xD0 and kv is not None and (da is not None or o == 0xB0):
            b = kv if is64 or k else kv & M32
            self.set_sym(dst, ("k", interp.alu(o, da or 0, b, is64, off, imm, pc)), out, ind, pc)
            return
        # frame pointer arithmetic and copies
        if is64 and o == 0xB0 and off == 0 and not k and self.sym.get(src, ("r",))[0] != "e":
            if src == 10:
                self.set_sym(dst, ("fp", 0), out, ind, pc)
            else:
                self.set_sym(dst, self.sym.get(src, ("r", src)), out, ind, pc)
            return
        fp = self.fp_off(dst)
        if is64 and fp is not None and kv is not None and o in (0x00, 0x10):
            delta = kv - (1 << 64) if kv >> 63 else kv
            self.set_sym(dst, ("fp", fp + (delta if o == 0x00 else -delta)), out, ind, pc)
            return
        expr = self.alu_expr(op, dst, src, off, imm, pc, kv)
        if not self.live_after.get(pc, 0xFFFF) >> dst & 1:
            self.before_write(dst, out, ind, pc)  # a dead value: not computed (ALU ops have no side effects)
            return
        if pc in self.fusable:
            depth = 1 + max((s[4] for s in (self.sym.get(dst), self.sym.get(src)) if s is not None and s[0] == "e"),
                            default=0)
            if depth <= MAX_FUSED:
                self.before_write(dst, out, ind, pc)
                self.sym[dst] = ("e", expr, frozenset(int(r) for r in _REG_RE.findall(expr)), self.fuse_use[pc], depth)
                return
        self.assign(dst, expr, out, ind, pc)

    def alu_expr(self, op: int, dst: int, src: int, off: int, imm: int, pc: int, kv: int | None) -> str:
        """Expression of the new value of ``dst``."""
        is64 = op & 0x07 == 0x07
        o = op & 0xF0
        a = self.v(dst)
        if o == 0xD0:
            if op & 0x08 or is64:  # to big endian / bswap
                if imm == 16:
                    return f"(({a} & 255) << 8) | (({a} >> 8) & 255)"
                return f"_BSWAP({a}, {imm})"
            return a if imm == 64 else f"{a} & {(1 << imm) - 1}"
        b = str(kv if is64 or kv is None else kv & M32) if kv is not None else self.v(src)
        if is64:
            if o == 0x00:
                return a if kv == 0 else f"({a} + {b}) & {M64}"
            if o == 0x10:
                return a if kv == 0 else f"({a} - {b}) & {M64}"
            if o == 0x20:
                return f"({a} * {b}) & {M64}"
            if o == 0x30 and off == 0:
                if kv is not None:
                    return f"{a} // {b}" if kv else "0"
                return f"({a} // {b} if {b} else 0)"
            if o == 0x90 and off == 0:
                if kv is not None:
                    return f"{a} % {b}" if kv else a
                return f"({a} % {b} if {b} else {a})"
            if o == 0x40:
                return f"{a} | {b}"
            if o == 0x50:
                return f"{a} & {b}"
            if o == 0xA0:
                return f"{a} ^ {b}"
            if o in (0x60, 0x70, 0xC0):
                sh = str(kv & 63) if kv is not None else f"({b} & 63)"
                if o == 0x60:
                    return f"({a} << {sh}) & {M64}"
                if o == 0x70:
                    return f"{a} >> {sh}"
                return f"((({a} ^ {S64}) - {S64}) >> {sh}) & {M64}"
            if o == 0x80:
                return f"-{a} & {M64}"
            if o == 0xB0 and off == 0:
                return b
            if o == 0xB0 and kv is None:
                bits = off
                return f"((({b} & {(1 << bits) - 1}) ^ {1 << (bits - 1)}) - {1 << (bits - 1)}) & {M64}"
        else:
            if o == 0x00:
                return f"({a} + {b}) & {M32}"
            if o == 0x10:
                return f"({a} - {b}) & {M32}"
            if o == 0x20:
                return f"({a} * {b}) & {M32}"
            if o == 0x30 and off == 0:
                if kv is not None:
                    return f"({a} & {M32}) // {b}" if kv & M32 else "0"
                return f"(({a} & {M32}) // ({b} & {M32}) if {b} & {M32} else 0)"
            if o == 0x90 and off == 0:
                if kv is not None:
                    return f"({a} & {M32}) % {b}" if kv & M32 else f"{a} & {M32}"
                return f"(({a} & {M32}) % ({b} & {M32}) if {b} & {M32} else {a} & {M32})"
            if o == 0x40:
                return f"({a} | {b}) & {M32}"
            if o == 0x50:
                return f"{a} & {b}" if kv is not None else f"{a} & {b} & {M32}"
            if o == 0xA0:
                return f"({a} ^ {b}) & {M32}"
            if o in (0x60, 0x70, 0xC0):
                sh = str(kv & 31) if kv is not None else f"({b} & 31)"
                if o == 0x60:
                    return f"({a} << {sh}) & {M32}"
                if o == 0x70:
                    return f"({a} & {M32}) >> {sh}"
                return f"(((({a} & {M32}) ^ {S32}) - {S32}) >> {sh}) & {M32}"
            if o == 0x80:
                return f"-{a} & {M32}"
            if o == 0xB0 and off == 0:
                return b if kv is not None else f"{b} & {M32}"
            if o == 0xB0 and kv is None:
                bits = off
                return f"((({b} & {(1 << bits) - 1}) ^ {1 << (bits - 1)}) - {1 << (bits - 1)}) & {M32}"
        # signed division/modulo and the rarer forms: the interpreter's semantics
        if kv is not None:
            bexpr = str(kv if is64 else kv & M32)
        else:
            bexpr = self.v(src) if is64 else f"{self.v(src)} & {M32}"
        return f"_ALU({o}, {a}, {bexpr}, {is64}, {off}, {imm}, {pc})"

    def address(self, base: int, off: int) -> tuple[int | None, str]:
        """``(stack offset, None)`` when ``base + off`` is a known stack
        address, else ``(None, expression)``."""
        fp = self.fp_off(base)
        if fp is not None:
            return 512 + fp + off, ""
        k = self.const(base)
        if k is not None:
            return None, str(k + off)
        b = self.v(base)
        return None, (f"{b} + {off}" if off > 0 else f"{b} - {-off}" if off < 0 else b)

    def load(self, base: int, off: int, size: int, signed: bool, pc: int) -> str:
        o, a = self.address(base, off)
        if o is not None:
            if 0 <= o and o + size <= 512:
                if size == 1 and not signed:
                    return f"_S[{o}]"
                fn = f"_SU{size}" if signed else f"_U{size}"
                return f"{fn}(_S, {o})[0]" + (f" & {M64}" if signed else "")
            return f"_FLT((r10 + {o - 512}) & {M64}, {size}, False, {pc})"  # raises
        if size == 1 and not signed:
            return f"_RB[(_a := {a}) >> 32][_a & {M32}]"
        fn = f"_SU{size}" if signed else f"_U{size}"
        return f"{fn}(_RB[(_a := {a}) >> 32], _a & {M32})[0]" + (f" & {M64}" if signed else "")

    def store(self, base: int, off: int, size: int, value: str, pc: int) -> str:
        o, a = self.address(base, off)
        if o is not None:
            if 0 <= o and o + size <= 512:
                if size == 1:
                    return f"_S[{o}] = {value}"
                return f"_P{size}(_S, {o}, {value})"
            return f"raise _FLT((r10 + {o - 512}) & {M64}, {size}, True, {pc})"
        if size == 1:
            return f"_WB[(_a := {a}) >> 32][_a & {M32}] = {value}"
        return f"_P{size}(_WB[(_a := {a}) >> 32], _a & {M32}, {value})"

    def atomic(self, pc: int, dst: int, src: int, off: int, imm: int, size: int, out: _Lines, ind: int) -> None:
        if imm == 0x100:  # load-acquire: dst = *(src + off)
            self.mod.debug[pc] = (size, False)
            self.assign(dst, self.load(src, off, size, False, pc), out, ind, pc)
            return
        s = self.v(src)
        if imm == 0x110:  # store-release: *(dst + off) = src
            self.mod.debug[pc] = (size, True)
            value = s if size == 8 else f"{s} & {(1 << (8 * size)) - 1}"
            out.add(ind, self.store(dst, off, size, value, pc), pc)
            return
        self.mod.debug[pc] = (size, True)
        mask = M64 if size == 8 else M32
        u, p = f"_U{size}", f"_P{size}"
        o, a = self.address(dst, off)
        if o is not None:
            if not (0 <= o and o + size <= 512):
                out.add(ind, f"raise _FLT((r10 + {o - 512}) & {M64}, {size}, True, {pc})", pc)
                return
            out.add(ind, "_m = _S", pc)
            out.add(ind, f"_o = {o}", pc)
        else:
            out.add(ind, f"_a = {a}", pc)
            out.add(ind, "_m = _WB[_a >> 32]", pc)
            out.add(ind, f"_o = _a & {M32}", pc)
        out.add(ind, f"_old = {u}(_m, _o)[0]", pc)
        v = s if size == 8 else f"({s} & {M32})"
        if imm == 0xF1:
            out.add(ind, f"if _old == {self.v(0)} & {mask}:", pc)
            out.add(ind + 1, f"{p}(_m, _o, {v})", pc)
            self.assign(0, "_old", out, ind, pc)
            return
        if imm == 0xE1:
            out.add(ind, f"{p}(_m, _o, {v})", pc)
            self.assign(src, "_old", out, ind, pc)
            return
        base = imm & ~0x01
        expr = {0x00: f"(_old + {v}) & {mask}", 0x40: f"_old | {v}", 0x50: f"_old & {v}", 0xA0: f"_old ^ {v}"}[base]
        out.add(ind, f"{p}(_m, _o, {expr})", pc)
        if imm & 0x01:
            self.assign(src, "_old", out, ind, pc)

    def call(self, pc: int, op: int, dst: int, src: int, imm: int, out: _Lines, ind: int) -> None:
        mod = self.mod
        self.dirty += 1  # a callee sees the budget as it is here: no charge may be moved before it
        args = ", ".join(self.v(r) for r in (1, 2, 3, 4, 5))
        if op & 0x08:  # callx
            out.add(ind, "_rs.left = _b", pc)
            self.assign(0, f"_CALLX(_rs, {pc}, {self.v(dst)}, {args}, _d)", out, ind, pc)
            out.add(ind, "_b = _rs.left", pc)
            return
        if src == 0:
            fn = mod.vm.helpers.table.get(imm)
            if fn is None:
                out.add(ind, f"raise _E('insn {pc}: unknown helper {imm}; register it with "
                        f"VM.helpers.register()', pc={pc})", pc)
                return
            if imm in (1, 2, 3) and self.map_call(pc, imm, fn, out, ind):
                return
            name = mod.bind(f"_H{imm}", fn)
            out.add(ind, "_rs.depth = _d", pc)
            sync = imm == 12 or _may_run_code(fn)
            if sync:
                out.add(ind, "_rs.left = _b", pc)
            if imm == 12:
                out.add(ind, f"_t = {name}(_rs, {args})", pc)
                out.add(ind, "if _t is not None:", pc)
                out.ret(ind + 1, f"_t.fast_function(0)(_rs, {args}, _d)", pc)
                out.add(ind, "_b = _rs.left", pc)
                return
            self.assign(0, f"{name}(_rs, {args}) & {M64}", out, ind, pc)
            if sync:
                out.add(ind, "_b = _rs.left", pc)
            return
        if src == 1:
            target = pc + 1 + imm
            out.add(ind, f"if _d >= {MAX_CALL_FRAMES - 1}:", pc)
            out.add(ind + 1, f"raise _E('insn {pc}: call depth exceeds {MAX_CALL_FRAMES} frames', pc={pc})", pc)
            if not 0 <= target < len(self.code):
                out.add(ind, f"raise _E('insn {target}: jump outside the program (0..{len(self.code) - 1})', "
                        f"pc={target})", pc)
                return
            mod.want(target)
            out.add(ind, "_rs.left = _b", pc)
            self.assign(0, f"F{target}(_rs, {args}, _d + 1)", out, ind, pc)
            out.add(ind, "_b = _rs.left", pc)
            return
        fn = mod.vm.kfuncs.get(imm)
        if fn is None:
            out.add(ind, f"raise _E('insn {pc}: unknown kfunc (BTF id {imm}); register it with "
                    f"VM.register_kfunc()', pc={pc})", pc)
            return
        name = mod.bind(f"_K{imm}", fn)
        out.add(ind, "_rs.depth = _d", pc)
        out.add(ind, "_rs.left = _b", pc)
        self.assign(0, f"{name}(_rs, {args}) & {M64}", out, ind, pc)
        out.add(ind, "_b = _rs.left", pc)

    def stack_bytes(self, r: int, size: int) -> str | None:
        """``bytes(_S[a:b])`` when register ``r`` points at ``size`` bytes of
        the current frame known at translation time."""
        fp = self.fp_off(r)
        if fp is None:
            return None
        o = 512 + fp
        if not (0 <= o and o + size <= 512):
            return None
        return f"bytes(_S[{o}:{o + size}])"

    def map_call(self, pc: int, hid: int, fn: Any, out: _Lines, ind: int) -> bool:
        """Call a map's method directly for ``bpf_map_lookup/update/delete_elem``
        when the map (``r1``) and the key (and value) stack slots are known
        here and the helper is the built-in one; same results as the helper."""
        from .helpers import maps as hmaps
        from .maps.base import EmuMap

        if fn is not {1: hmaps.map_lookup_elem, 2: hmaps.map_update_elem, 3: hmaps.map_delete_elem}[hid]:
            return False
        handle = self.const(1)
        mp = self.mod.vm.space.handle(handle) if handle is not None else None
        if not isinstance(mp, EmuMap) or mp.handle != handle or mp.closed:
            return False
        key = self.stack_bytes(2, mp.key_size)
        if key is None:
            return False
        name = f"_M{mp.id}"
        if hid == 1:
            self.mod.bind(name + "_lookup", mp.bpf_lookup)
            self.assign(0, f"{name}_lookup(_rs, {key})", out, ind, pc)
            return True
        if hid == 3:
            self.mod.bind(name + "_delete", mp.bpf_delete)
            self.assign(0, f"{name}_delete(_rs, {key}) & {M64}", out, ind, pc)
            return True
        value = self.stack_bytes(3, mp.value_size) if mp.has_values else '""'
        if value is None:
            return False
        self.mod.bind(name + "_update", mp.bpf_update)
        self.assign(0, f"{name}_update(_rs, {key}, {value}, {self.v(4)}) & {M64}", out, ind, pc)
        return True

    def negated(self, pc: int) -> str:
        """The condition of the jump at ``pc``, negated (``!=`` for ``==``, …)."""
        cond = self.condition(pc)
        for op, neg in _NEGATE:
            left, sep, right = cond.partition(op)
            if sep and op not in right:
                return f"{left}{neg}{right}"
        return f"not ({cond})"

    def condition(self, pc: int) -> str:
        op, dst, src, off, imm = self.code[pc]
        o = op & 0xF0
        is64 = op & 0x07 == 0x05
        if o == 0xE0:  # may_goto: taken when the budget is used up
            return "_MAYGOTO(_rs)"
        if op & 0x08:
            a, b = f"r{dst}", f"r{src}"
            if not is64:
                a, b = f"({a} & {M32})", f"({b} & {M32})"
            sa, sb = (f"({a} ^ {S64 if is64 else S32})", f"({b} ^ {S64 if is64 else S32})")
        else:
            bv = (imm & M64) if is64 else (imm & M32)
            a = f"r{dst}" if is64 else f"(r{dst} & {M32})"
            b = str(bv)
            sa, sb = f"({a} ^ {S64 if is64 else S32})", str(bv ^ (S64 if is64 else S32))
        if o == 0x10:
            return f"{a} == {b}"
        if o == 0x50:
            return f"{a} != {b}"
        if o == 0x20:
            return f"{a} > {b}"
        if o == 0x30:
            return f"{a} >= {b}"
        if o == 0xA0:
            return f"{a} < {b}"
        if o == 0xB0:
            return f"{a} <= {b}"
        if o == 0x40:
            return f"{a} & {b}"
        if o == 0x60:
            return f"{sa} > {sb}"
        if o == 0x70:
            return f"{sa} >= {sb}"
        if o == 0xC0:
            return f"{sa} < {sb}"
        if o == 0xD0:
            return f"{sa} <= {sb}"
        raise BpfmuxError(f"internal error: not a condition at insn {pc}")  # pragma: no cover

    def block_body(self, bid: int, out: _Lines, ind: int, cell: _Charge | None = None,
                   charged: bool = False) -> _Charge | None:
        """Statements of block ``bid`` (without its terminator's transfer),
        after the block's charge on the run budget: added to ``cell`` (a
        charge line emitted earlier on every path to here) when given, else
        a charge line of its own; nothing when ``charged`` (``cell`` already
        counts it). Returns the charge line in force."""
        blk = self.cfg.blocks[bid]
        if blk.term == OUTSIDE:
            n = len(self.code)
            out.add(ind, f"raise _E('insn {bid}: jump outside the program (0..{n - 1})', pc={bid})", bid)
            return None
        if bid not in self.folded and not charged:
            if cell is not None:
                cell.count += self.charge[bid]
            else:
                cell = _Charge(self.charge[bid], self.dirty)
                out.add(ind, "", bid, (CHARGE, cell))
        pcs = blk.pcs
        last = pcs[-1]
        self.sym = {}
        if len(pcs) == 1 and blk.term in (GOTO, COND, EXIT):  # only the terminator: nothing to write
            self.exit_value = "r0"
            return cell
        self.analyse_block(blk)
        stop = last if blk.term in (GOTO, COND, EXIT) else -1
        for pc in pcs:
            if pc == stop:
                break
            self.stmts(pc, out, ind)
            if self.sym:
                for d, sym in list(self.sym.items()):
                    if sym[0] == "e" and sym[3] == pc:
                        del self.sym[d]  # its single use was this instruction
        if blk.term == EXIT:
            self.exit_value = self.v(0)  # other registers are dead after the exit
            self.sym = {}
        elif self.sym:
            live = self.live_out[bid]
            if blk.term == COND:
                live = live | _rw(self.slots[last])[0]
            self.flush(out, ind, last, live)
        return cell

    def analyse_block(self, blk: Any) -> None:
        """Registers live after each instruction of ``blk`` (bit masks), and
        the ALU results used exactly once soon after in the block (fused into
        that use)."""
        pcs = blk.pcs
        live = _mask(self.live_out[blk.id])
        if len(pcs) == 1:
            self.live_after = {pcs[0]: live}
            self.fusable = _NOSET
            return
        code = self.code
        slots = self.slots
        rws = [_rw_masks(slots[pc]) for pc in pcs]
        after: dict[int, int] = {}
        for i in range(len(pcs) - 1, -1, -1):
            after[pcs[i]] = live
            reads, writes = rws[i]
            live = (live & ~writes) | reads
        self.live_after = after
        fusable = set()
        self.fuse_use = {}
        last = pcs[-1]
        cond_end = self.cfg.blocks[blk.id].term == COND
        n = len(pcs)
        for i, pc in enumerate(pcs):
            op, dst, src, off, imm = code[pc]
            if op & 0x07 not in (0x04, 0x07) or op > 0xFF or not after[pc] >> dst & 1:
                continue
            bit = 1 << dst
            for j in range(i + 1, min(n, i + 1 + FUSE_WINDOW)):
                reads, writes = rws[j]
                if not reads & bit:
                    continue
                jpc = pcs[j]
                jop, jdst, jsrc = code[jpc][0], code[jpc][1], code[jpc][2]
                twice = jop & 0x07 in (0x04, 0x07) and jop & 0x08 and jdst == jsrc == dst and jop & 0xF0 != 0xB0
                cond = jpc == last and cond_end
                if not twice and not cond and (writes & bit or not after[jpc] & bit):
                    fusable.add(pc)
                    self.fuse_use[pc] = jpc
                break
        self.fusable = fusable

    # -- structured emission -------------------------------------------------------

    def emit_structured(self) -> _Lines:
        cfg = self.cfg
        if not cfg.reducible:
            raise _Fallback("irreducible control flow")
        out, pending = self.do_tree(cfg.entry, [], 1, 0)
        if pending:
            raise _Fallback(f"unresolved targets {sorted(pending)}")  # pragma: no cover - defensive
        return out

    def do_tree(self, x: int, loops: list[int], ind: int, depth: int) -> tuple[_Lines, set[int]]:
        """Code of block ``x`` and of the blocks it dominates, and the join
        targets its paths leave pending (``_nx``)."""
        if depth > MAX_DEPTH:
            raise _Fallback(f"nested deeper than {MAX_DEPTH} levels")
        cfg = self.cfg
        if x not in cfg.headers:
            return self.node_within(x, loops, ind, depth)
        out = _Lines()
        if self._straight_loop(x):
            # one charge per iteration and nothing else touches the budget: the loop's range counts it down
            head = _Charge(self.charge[x], self.dirty)
            body, pending = self.node_within(x, loops + [x], ind + 1, depth + 1, head)
            out.add(ind, "", x, (CHARGE, _RangeLoop(head)))
            out.extend(body)
            self.dirty += 1
            if pending and not body.last_is_transfer(ind + 1):
                out.add(ind + 1, "break", x)
            out.add(ind, "else:", x)
            out.add(ind + 1, f"raise _BUDGET({x})", x)
        else:
            body, pending = self.node_within(x, loops + [x], ind + 1, depth + 1)
            out.add(ind, "while True:", x)
            out.add(ind + 1, "if _b < 0:", x)
            out.add(ind + 2, f"raise _BUDGET({x})", x)
            out.extend(body)
            self.dirty += 1
            if pending and not body.last_is_transfer(ind + 1):
                out.add(ind + 1, "break", x)
        pending = set(pending)
        if loops and loops[-1] in pending:
            h = loops[-1]
            if pending == {h}:
                out.add(ind, "continue", x)
            else:
                self.tested.update(pending)
                out.add(ind, f"if _nx == {h}:", x)
                out.add(ind + 1, "continue", x)
            pending.discard(h)
        return out, pending

    def _straight_loop(self, h: int) -> bool:
        """Whether the loop headed by ``h`` charges the budget once per
        iteration and nothing else in it does: every other block of it is
        charged with the header, and it makes no call (a callee and the
        caller share the budget)."""
        blocks = self.cfg.blocks
        code = self.code
        for b in self.cfg.headers[h]:
            if b != h and b not in self.folded:
                return False
            for pc in blocks[b].pcs:
                if code[pc][0] in (0x85, 0x8D):
                    return False
        return True

    def node_within(self, x: int, loops: list[int], ind: int, depth: int,
                    head: _Charge | None = None) -> tuple[_Lines, set[int]]:
        """Block ``x``, the blocks its branches lead to alone, then the join
        points it dominates. A chain (a block that falls into the only block
        it leads to; the last join point) is followed in this loop, not by
        recursion, so long straight or diamond-chained code nests nothing."""
        cfg = self.cfg
        fwd = cfg.forward_preds
        rpo = cfg.rpo_index
        out = _Lines()
        carry: set[int] = set()
        cell: _Charge | None = head  # a loop header's charge, written by its loop
        all_merges = self.merges
        while True:
            merges = all_merges.get(x, ())
            if cell is not None and cell.mark != self.dirty:
                cell = None
            cell = self.block_body(x, out, ind, cell, charged=head is not None)
            head = None
            blk = cfg.blocks[x]
            if not merges and blk.term in (FALL, GOTO):
                s = blk.succs[0]
                if rpo[s] > rpo[x] and fwd[s] < 2 and s not in cfg.headers:
                    x = s
                    continue
            pending = self.terminator(x, loops, out, ind, depth)
            nxt = None
            for i, y in enumerate(merges):
                guarded = pending != {y}
                if guarded:
                    self.tested.update(pending)
                    out.add(ind, f"if _nx == {y}:", y)
                pending.discard(y)
                yind = ind + 1 if guarded else ind
                if i == len(merges) - 1 and y not in cfg.headers:
                    nxt = (y, yind)
                    break
                sub, sub_pending = self.do_tree(y, loops, yind, depth + 1)
                out.extend(sub)
                pending |= sub_pending
            carry |= pending
            if nxt is None:
                return out, carry
            if nxt[1] != ind:
                cell = None  # only some paths reach the join point: it charges for itself
            x, ind = nxt

    def branch(self, src: int, dst: int, loops: list[int], ind: int, depth: int) -> tuple[_Lines, set[int]]:
        cfg = self.cfg
        if cfg.rpo_index[dst] <= cfg.rpo_index[src]:
            out = _Lines()
            self.dirty += 1
            if loops and loops[-1] == dst:
                out.add(ind, "continue", src)
                return out, set()
            if dst not in loops:  # pragma: no cover - a back edge always targets an enclosing loop
                raise _Fallback("back edge to a block that is not an enclosing loop")
            out.jump(ind, dst, src)
            return out, {dst}
        if cfg.forward_preds[dst] >= 2:
            jump = self._jumps.get((ind, dst))
            if jump is None:  # one shared (never changed) line set per target and indentation
                jump = self._jumps[(ind, dst)] = _Lines()
                jump.jump(ind, dst, dst)
            return jump, {dst}
        return self.do_tree(dst, loops, ind, depth + 1)

    def terminator(self, x: int, loops: list[int], out: _Lines, ind: int, depth: int) -> set[int]:
        cfg = self.cfg
        blk = cfg.blocks[x]
        term = blk.term
        if term in (FAULT, OUTSIDE):
            return set()
        last = blk.pcs[-1]
        if term == EXIT:
            self.dirty += 1
            out.ret(ind, self.exit_value, last)
            return set()
        if term in (FALL, GOTO):
            sub, pending = self.branch(x, blk.succs[0], loops, ind, depth)
            out.extend(sub)
            return pending
        assert term == COND
        cond = self.condition(last)
        taken, fall = blk.succs
        t_lines, t_pending = self.branch(x, taken, loops, ind + 1, depth)
        f_lines, f_pending = self.branch(x, fall, loops, ind + 1, depth)
        if not t_pending:
            out.add(ind, f"if {cond}:", last)
            out.extend(t_lines)
            out.extend(f_lines, -1)
        elif not f_pending:
            out.add(ind, f"if {self.negated(last)}:", last)
            out.extend(f_lines)
            out.extend(t_lines, -1)
        elif t_pending == f_pending and len(t_pending) == 1 and _only_jump(t_lines):
            out.add(ind, f"if {self.negated(last)}:", last)  # both paths go to one join point
            out.extend(f_lines)
            out.extend(t_lines, -1)
        elif t_pending == f_pending and len(t_pending) == 1 and _only_jump(f_lines):
            out.add(ind, f"if {cond}:", last)
            out.extend(t_lines)
            out.extend(f_lines, -1)
        else:
            out.add(ind, f"if {cond}:", last)
            out.extend(t_lines)
            out.add(ind, "else:", last)
            out.extend(f_lines)
        return t_pending | f_pending

    # -- dispatch fallback ------------------------------------------------------------

    def emit_dispatch(self, name: str, head: list[tuple[str, int]]) -> list[Rendered]:
        """The block-dispatch form: a loop that runs the block ``_nx`` names,
        found by a binary search over the block ids. A function of more than
        :data:`SEGMENT_BLOCKS` blocks is split into segment functions (each
        its own dispatch loop) that hand control back to the main loop when
        they leave their segment."""
        cfg = self.cfg
        self.tested = set()
        order = cfg.rpo
        if len(order) <= SEGMENT_BLOCKS:
            body = _Lines()
            body.add(1, f"_nx = {cfg.entry}", cfg.entry)
            body.add(1, "while True:", cfg.entry)
            self._segment(sorted(order), None, body, 2)
            return [render(name, head, body, self.tested, 1 << 60)]
        e = self.entry
        segments = [order[i : i + SEGMENT_BLOCKS] for i in range(0, len(order), SEGMENT_BLOCKS)]
        table: dict[int, str] = {}
        out = []
        body = _Lines()
        body.add(1, f"_nx = {cfg.entry}", cfg.entry)
        body.add(1, "while True:", cfg.entry)
        body.add(2, f"{STATE}, _ret = _SEG{e}[_nx]({PART_ARGS})", cfg.entry)
        body.add(2, "if _ret is not None:", cfg.entry)
        body.add(3, "return _ret", cfg.entry)
        out.append(render(name, head, body, self.tested, 1 << 60))
        for k, ids in enumerate(segments):
            fname = f"{name}_s{k}"
            members = set(ids)
            for bid in ids:
                table[bid] = fname
            seg = _Lines()
            seg.add(1, "while True:", ids[0])
            self._segment(sorted(ids), members, seg, 2)
            out.append(render(fname, [(f"def {fname}({PART_ARGS}):", ids[0])], seg, self.tested, 1 << 60, state=True))
        self.mod.segments[f"_SEG{e}"] = table
        self.mod.globals[f"_SEG{e}"] = {}
        return out

    def _segment(self, ids: list[int], members: set[int] | None, out: _Lines, ind: int) -> None:
        """A dispatch loop body over the sorted block ids ``ids``; targets
        outside ``members`` (``None``: all are inside) return to the caller."""
        out.add(ind, "if _b < 0:", ids[0])
        out.add(ind + 1, "raise _BUDGET(_nx)", ids[0])
        # the binary search tree, written in order without recursion: (lo, hi, indent, after an "else:")
        stack: list[tuple[int, int, int, bool]] = [(0, len(ids), ind, False)]
        while stack:
            lo, hi, d, is_else = stack.pop()
            if is_else:
                out.add(d, "else:", ids[lo])
                d += 1
            if hi - lo == 1:
                self._leaf(ids[lo], members, out, d)
                continue
            mid = (lo + hi) // 2
            out.add(d, f"if _nx < {ids[mid]}:", ids[lo])
            stack.append((mid, hi, d, True))
            stack.append((lo, mid, d + 1, False))

    def _leaf(self, bid: int, members: set[int] | None, out: _Lines, ind: int) -> None:
        cfg = self.cfg
        blk = cfg.blocks[bid]
        self.block_body(bid, out, ind)
        if blk.term in (FAULT, OUTSIDE):
            return
        last = blk.pcs[-1]
        if blk.term == EXIT:
            out.ret(ind, self.exit_value, last)
            return
        if blk.term in (FALL, GOTO):
            self._goto(blk.succs[0], members, out, ind, last)
            return
        taken, fall = blk.succs
        cond = self.condition(last)
        if members is None or (taken in members and fall in members):
            out.add(ind, f"_nx = {taken} if {cond} else {fall}", last)
            out.add(ind, "continue", last)
            return
        out.add(ind, f"if {cond}:", last)
        self._goto(taken, members, out, ind + 1, last)
        self._goto(fall, members, out, ind, last)

    def _goto(self, target: int, members: set[int] | None, out: _Lines, ind: int, pc: int) -> None:
        out.add(ind, f"_nx = {target}", pc)
        if members is None or target in members:
            out.add(ind, "continue", pc)
        else:
            out.add(ind, f"return {STATE}, None", pc)

    def _uses_stack(self) -> bool:
        """Whether some instruction of this function reads r10 (only through r10 can it reach its stack)."""
        for b in self.cfg.blocks.values():
            for pc in b.pcs:
                insn = self.slots[pc]
                if insn is not None and 10 in regs_read(insn, abi=False):
                    return True
        return False

    def emit(self, force_dispatch: bool = False) -> list[Rendered]:
        """The Python functions of this BPF function (the main one first)."""
        e = self.entry
        name = f"F{e}"
        if self._uses_stack():
            frame = [("    r10, _S = _rs.frame(_d)", e), ("    r10 += 512", e)]
        else:  # no stack to set up; a nested call still takes its frame (the depth limit is the frames')
            frame = [("    _S = None", e), ("    r10 = 0", e), ("    if _d:", e), ("        _rs.frame(_d)", e)]
        head = [
            (f"def {name}(_rs, r1, r2, r3, r4, r5, _d):", e),
            *frame,
            ("    r0 = r6 = r7 = r8 = r9 = 0", e),
            ("    _b = _rs.left", e),
            ("    if _b < 0:", e),
            (f"        raise _BUDGET({e})", e),
        ]
        if not force_dispatch:
            limit = sys.getrecursionlimit()
            sys.setrecursionlimit(max(limit, 12 * MAX_DEPTH + 2000))
            try:
                return [render(name, head, self.emit_structured(), self.tested, PART_LINES)]
            except (_Fallback, TooDeep, RecursionError):
                pass
            finally:
                sys.setrecursionlimit(limit)
        return self.emit_dispatch(name, head)


#: Comparisons and their negations (``>=`` before ``>``: the longer operator first).
_NEGATE = ((" == ", " != "), (" != ", " == "), (" >= ", " < "), (" <= ", " > "), (" > ", " <= "), (" < ", " >= "))


def _may_run_code(fn: Any) -> bool:
    """Whether helper ``fn`` may run program code (callbacks) or charge the
    run budget itself: any helper but the built-in ones known not to, which
    need no copy of the budget in :attr:`RunState.left`."""
    module = getattr(fn, "__module__", "") or ""
    return not module.startswith(_HELPERS_PACKAGE) or getattr(fn, "__name__", "") in _CALLBACK_HELPERS


_HELPERS_PACKAGE = __package__ + ".helpers"
#: Built-in helpers that call back into the program or charge the budget.
_CALLBACK_HELPERS = frozenset({"bpf_loop", "for_each_map_elem"})


def _only_jump(lines: _Lines) -> bool:
    """Whether ``lines`` is one ``_nx = y`` line."""
    if len(lines.items) != 1:
        return False
    item = lines.items[0]
    return len(item) == 4 and isinstance(item[3], tuple) and item[3][0] == JUMP


class _Module:
    """Emits every function of a program into Python source chunks."""

    def __init__(self, prog: EmuProgram) -> None:
        self.prog = prog
        self.vm = prog.vm
        self.globals: dict[str, Any] = {}
        self.debug: dict[int, tuple[int, bool]] = {}
        self.wanted: list[int] = []
        #: name of a dispatch table → block id → segment function name
        self.segments: dict[str, dict[int, str]] = {}

    def bind(self, name: str, value: Any) -> str:
        self.globals[name] = value
        return name

    def want(self, entry: int) -> None:
        if entry not in self.prog.entries:
            self.prog.entries.add(entry)
        self.wanted.append(entry)

    def build(self, dispatch: bool = False) -> list[tuple[str, list[int]]]:
        """The program as source chunks, each ``(source, line → slot)``
        (line numbers from 1; ``-1``: no slot)."""
        done: set[int] = set()
        todo = sorted(self.prog.entries)
        chunks: list[tuple[str, list[int]]] = []
        text: list[str] = []
        line_pc = [-1]
        while todo:
            e = todo.pop()
            if e in done:
                continue
            done.add(e)
            for rendered in _Func(self, e).emit(dispatch):
                for _, lines in rendered.functions:
                    if len(line_pc) > CHUNK_LINES:
                        chunks.append(("\n".join(text) + "\n", line_pc))
                        text, line_pc = [], [-1]
                    for t, pc in lines:
                        text.append(t)
                        line_pc.append(pc)
                    text.append("")
                    line_pc.append(-1)
            todo.extend(w for w in self.wanted if w not in done)
            self.wanted.clear()
        if text:
            chunks.append(("\n".join(text) + "\n", line_pc))
        return chunks


def _base_globals(vm: Any) -> dict[str, Any]:
    g: dict[str, Any] = {
        "_RB": vm.space.rbufs,
        "_WB": vm.space.wbufs,
        "_FLT": _fault_raiser(vm.space),
        "_E": EmulatorFault,
        "_BAD": _raise_bad,
        "_ALU": interp.alu,
        "_BSWAP": interp.bswap,
        "_LDPKT": interp.ld_packet,
        "_MAYGOTO": _may_goto,
        "_CALLX": _callx,
        "_BUDGET": _budget_fault(vm),
    }
    for n, st in _ST.items():
        g[f"_U{n}"] = st.unpack_from
        g[f"_P{n}"] = st.pack_into
    for n, st in _STS.items():
        g[f"_SU{n}"] = st.unpack_from
    return g


def _fault_raiser(space: Any) -> Callable[..., None]:
    def flt(addr: int, size: int, write: bool, pc: int) -> None:
        raise space.fault(addr, size, write, pc)

    return flt


def _raise_bad(pc: int, what: str) -> None:
    raise interp._bad(pc, what)


def _budget_fault(vm: Any) -> Callable[[int], EmulatorFault]:
    def fault(pc: int) -> EmulatorFault:
        return interp.budget_fault(vm.run_budget, pc)

    return fault


def _may_goto(rs: RunState) -> bool:
    if rs.loops_left <= 0:
        return True
    rs.loops_left -= 1
    return False


def _callx(rs: RunState, pc: int, target: int, r1: int, r2: int, r3: int, r4: int, r5: int, depth: int) -> int:
    """``callx``: a function address calls that function, a small number the
    helper with that id (as uBPF and the conformance suite do)."""
    from .machine import EmuProgram

    callee = rs.space.handle(target) if target >= 1 << 32 else None
    if callee is None:
        hid = target
        fn = rs.vm.helpers.table.get(hid)
        if fn is None:
            raise EmulatorFault(f"insn {pc}: unknown helper {hid}; register it with VM.helpers.register()", pc=pc)
        if hid == 12:
            raise EmulatorFault(f"insn {pc}: a tail call through callx is not supported", pc=pc)
        rs.depth = depth
        return fn(rs, r1, r2, r3, r4, r5) & M64
    if not isinstance(callee, EmuProgram):
        raise EmulatorFault(f"insn {pc}: callx to {target:#x}, which is not code", pc=pc, address=target)
    off = target - callee.code_addr
    if off % 8 or not 0 <= off // 8 < len(callee.code):
        raise EmulatorFault(f"insn {pc}: callx to {target:#x}, not an instruction of {callee.name}", pc=pc,
                            address=target)
    if depth + 1 >= MAX_CALL_FRAMES:
        raise EmulatorFault(f"insn {pc}: call depth exceeds {MAX_CALL_FRAMES} frames", pc=pc)
    return callee.fast_function(off // 8)(rs, r1, r2, r3, r4, r5, depth + 1)


def compile_program(prog: EmuProgram, dispatch: bool = False) -> dict[int, Callable[..., int]]:
    """Translate and compile every function of ``prog``; returns slot → function.

    ``dispatch=True`` forces the block-dispatch form (used by tests to check
    that both forms agree).

    :raises BpfmuxError: not even the dispatch form compiles.
    """
    mod = _Module(prog)
    collect = gc.isenabled()
    gc.disable()  # translation makes many objects and frees none: collecting as it goes is wasted work
    try:
        chunks = mod.build(dispatch)
    finally:
        if collect:
            gc.enable()
    total = sum(len(lines) for _, lines in chunks)
    cache = total <= CACHE_MAX_LINES
    ns = _base_globals(prog.vm)
    ns.update(mod.globals)
    for source, line_pc in chunks:
        # the line → slot table is part of the key: different programs can translate to the same source
        pcs = set(line_pc)
        debug = {pc: v for pc, v in mod.debug.items() if pc in pcs}
        key = source + repr(line_pc) + repr(sorted(debug.items()))
        digest = hashlib.blake2b(key.encode(), digest_size=12).hexdigest()
        filename = f"{_FILE_PREFIX}{prog.name} {digest}>"
        code = _CODE_CACHE.get(filename)
        if code is None:
            try:
                code = compile(source, filename, "exec")
            except (SyntaxError, RecursionError, MemoryError, SystemError) as e:
                if dispatch:
                    raise BpfmuxError(f"fast tier: cannot compile {prog.name!r}: {e}") from e
                return compile_program(prog, dispatch=True)
            if cache:
                if len(_CODE_CACHE) >= _CODE_CACHE_MAX:
                    _CODE_CACHE.pop(next(iter(_CODE_CACHE)))
                _CODE_CACHE[filename] = code
            _DEBUG[filename] = (line_pc, debug)
        exec(code, ns)
    for table, targets in mod.segments.items():
        ns[table].update((bid, ns[fname]) for bid, fname in targets.items())
    prog._fast_source = "".join(source for source, _ in chunks) if cache else None
    return {e: ns[f"F{e}"] for e in prog.entries if f"F{e}" in ns}

def _generated_frame(tb: types.TracebackType | None) -> tuple[types.TracebackType | None, bool]:
    """The innermost traceback entry in generated code, and whether it is
    the innermost entry of all (the exception came from generated code)."""
    last = None
    innermost = False
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.startswith(_FILE_PREFIX):
            last = tb
            innermost = tb.tb_next is None
        tb = tb.tb_next
    return last, innermost


def locate_fault(fault: EmulatorFault, tb: types.TracebackType | None) -> None:
    """Give a fault raised by a helper during a fast-tier run the slot of
    the instruction that called the helper."""
    if fault.pc is not None:
        return
    entry, _ = _generated_frame(tb)
    if entry is None:
        return
    info = _DEBUG.get(entry.tb_frame.f_code.co_filename)
    if info is None:
        return
    lines = info[0]
    pc = lines[entry.tb_lineno] if entry.tb_lineno < len(lines) else -1
    if pc >= 0:
        fault.pc = pc
        fault.args = (f"insn {pc}: {fault.args[0]}",) + fault.args[1:]


def convert_exception(rs: RunState, exc: BaseException, tb: types.TracebackType | None) -> EmulatorFault | None:
    """The :class:`EmulatorFault` for a Python error raised by generated code
    (an access to an unmapped slot or past a buffer), or ``None`` when the
    error did not come from generated code."""
    entry, innermost = _generated_frame(tb)
    if entry is None:
        return None
    info = _DEBUG.get(entry.tb_frame.f_code.co_filename)
    if info is None:
        return None
    lines, debug = info
    pc = lines[entry.tb_lineno] if entry.tb_lineno < len(lines) else -1
    if isinstance(exc, RecursionError):
        return EmulatorFault(f"insn {pc}: too deeply nested calls", pc=pc)
    if not innermost:
        return None
    access = debug.get(pc)
    if access is None:
        return None
    size, write = access
    addr = entry.tb_frame.f_locals.get("_a")
    if addr is None:  # pragma: no cover - every generic access sets _a first
        return None
    return rs.space.fault(addr & M64, size, write, pc)
